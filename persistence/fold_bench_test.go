package persistence

import (
	"strconv"
	"testing"
)

// benchFoldOps is a 500-op batch over 100 keys (each key touched five
// times, a delete now and then), the shape of a hot topic's batch.
func benchFoldOps() []Op {
	ops := make([]Op, 500)
	for i := range ops {
		k := "k" + strconv.Itoa(i%100)
		ops[i] = Op{Kind: OpUpsert, Key: k, Doc: []byte(`{"id":"` + k + `","seq":` + strconv.Itoa(i) + `}`), Position: strconv.Itoa(i)}
		if i%17 == 0 {
			ops[i] = Op{Kind: OpDelete, Key: k, Position: strconv.Itoa(i)}
		}
	}
	return ops
}

// BenchmarkFold folds benchFoldOps.
func BenchmarkFold(b *testing.B) { benchFold(b, func(ops []Op) int { return len(Fold(ops)) }) }

// BenchmarkFoldIndexes is BenchmarkFold without the copies of the ops
// (what the PostgreSQL store folds with).
func BenchmarkFoldIndexes(b *testing.B) {
	benchFold(b, func(ops []Op) int { return len(FoldIndexes(ops)) })
}

func benchFold(b *testing.B, fold func([]Op) int) {
	ops := benchFoldOps()
	b.ReportAllocs()
	for b.Loop() {
		if n := fold(ops); n != 100 {
			b.Fatalf("folded to %d ops, want 100", n)
		}
	}
	b.ReportMetric(float64(len(ops)*b.N)/b.Elapsed().Seconds(), "ops/s")
}
