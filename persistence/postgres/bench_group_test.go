package postgres

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/persistence"
)

// BenchmarkApplyGroup writes 12 units' stream batches of 500 changed rows
// each per iteration three ways, in turn, into one table: 12 Applies at
// once from 12 goroutines (the runtime without group commit), 12 Applies
// one after the other, and one ApplyGroup (one pipeline). It reports the
// rows/s of each.
//
//	go test -run '^$' -bench ApplyGroup -benchtime 30x ./persistence/postgres/
func BenchmarkApplyGroup(b *testing.B) {
	const units, size = 12, 500
	s := openTest(b, pg.URL(b), Config{})
	ctx := b.Context()
	ls := make([]persistence.Lease, units)
	for u := range ls {
		ls[u] = acquire(b, s, fmt.Sprintf("bench/%d", u), "node-1")
	}
	pos := 0
	batches := func() []*persistence.Batch {
		bs := make([]*persistence.Batch, units)
		for u := range bs {
			ops := make([]persistence.Op, size)
			for j := range ops {
				pos++
				key := fmt.Sprintf("key-%08d", pos%(10*units*size))
				ops[j] = persistence.Op{Kind: persistence.OpUpsert, Key: key, Position: fmt.Sprint(pos),
					Doc: fmt.Appendf(nil, `{"id":%q,"seq":%d,"name":"customer","amount":%d.25}`, key, pos, pos%1000)}
			}
			bs[u] = &persistence.Batch{Source: "bench", Unit: ls[u].Unit, Lease: ls[u], Table: "bench", Ops: ops, Checkpoint: fmt.Sprint(pos)}
		}
		return bs
	}
	apply := func(bt *persistence.Batch) {
		if _, err := s.Apply(ctx, bt); err != nil {
			b.Error(err)
		}
	}
	ways := []struct {
		name string
		run  func([]*persistence.Batch)
		took time.Duration
	}{
		{name: "concurrent", run: func(bs []*persistence.Batch) {
			var wg sync.WaitGroup
			for _, bt := range bs {
				wg.Go(func() { apply(bt) })
			}
			wg.Wait()
		}},
		{name: "sequential", run: func(bs []*persistence.Batch) {
			for _, bt := range bs {
				apply(bt)
			}
		}},
		{name: "group", run: func(bs []*persistence.Batch) {
			for _, r := range s.ApplyGroup(ctx, bs) {
				if r.Err != nil {
					b.Error(r.Err)
				}
			}
		}},
	}
	for range 10 { // the table, the statements, the keys present
		ways[1].run(batches())
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		for k := range ways {
			w := &ways[(i+k)%len(ways)]
			bs := batches()
			t0 := time.Now()
			w.run(bs)
			w.took += time.Since(t0)
		}
	}
	rows := float64(units * size * b.N)
	for _, w := range ways {
		b.ReportMetric(rows/w.took.Seconds(), w.name+"-rows/s")
	}
}
