package sqlite_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/drover-dev/drover/persistence"
)

// BenchmarkApply measures the fenced Apply of batches of upserts whose
// documents change every time (so every row is rewritten), with the
// checkpoint, on a file with WAL and synchronous=NORMAL.
func BenchmarkApply(b *testing.B) {
	for _, size := range []int{1, 100, 1000} {
		b.Run("batch="+strconv.Itoa(size), func(b *testing.B) {
			b.ReportAllocs()
			ctx := context.Background()
			s, ls, _ := leased(b, benchUnits(1)...)
			l := ls[0]
			const keys = 10_000
			ops := make([]persistence.Op, size)
			pos := 0
			for i := 0; b.Loop(); i++ {
				for j := range ops {
					pos++
					p := strconv.Itoa(pos)
					ops[j] = persistence.Op{
						Kind:     persistence.OpUpsert,
						Key:      "k" + strconv.Itoa(pos%keys),
						Doc:      []byte(`{"id":` + strconv.Itoa(pos%keys) + `,"name":"customer","seq":` + p + `}`),
						Position: p,
					}
				}
				a, err := s.Apply(ctx, &persistence.Batch{Source: "bench", Unit: "bench/0", Lease: l, Table: "bench", Ops: ops, Checkpoint: strconv.Itoa(pos)})
				if err != nil {
					b.Fatal(err)
				}
				if a.Upserted != size {
					b.Fatalf("upserted %d, want %d", a.Upserted, size)
				}
			}
			b.ReportMetric(float64(size*b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// BenchmarkCheckpoints reads the checkpoints of a source of 12 units, as
// the bench's latency poller does every 5 ms and the debug views do.
func BenchmarkCheckpoints(b *testing.B) {
	b.ReportAllocs()
	ctx := context.Background()
	const units = 12
	s, ls, _ := leased(b, benchUnits(units)...)
	for u, l := range ls {
		ops := []persistence.Op{{Kind: persistence.OpUpsert, Key: "k" + strconv.Itoa(u), Doc: []byte(`{"n":1}`), Position: "7"}}
		if _, err := s.Apply(ctx, &persistence.Batch{Source: "bench", Unit: l.Unit, Lease: l, Table: "bench", Ops: ops, Checkpoint: "7"}); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		cps, err := s.Checkpoints(ctx, "bench")
		if err != nil {
			b.Fatal(err)
		}
		if len(cps) != units {
			b.Fatalf("%d checkpoints, want %d", len(cps), units)
		}
	}
}
