package storetest

import (
	"fmt"
	"slices"
	"sync"

	"github.com/drover-dev/drover/persistence"
)

// testOverlappingSlots is issue 9 item 13: two slots of one queue source
// apply the same redelivered messages at once, in opposite orders, into one
// records table. A store that locks dedupe ids or record keys in batch
// order lets the two transactions deadlock; every apply must succeed, and
// each message is applied by exactly one of them.
func testOverlappingSlots(e *env) {
	const rounds, n = 4, 200
	slots := []persistence.Lease{e.acquire("jobs/slot-0", "node-1"), e.acquire("jobs/slot-1", "node-1")}
	for r := range rounds {
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("r%d-m%04d", r, i)
		}
		batches := make([]*persistence.Batch, 2)
		for s, l := range slots {
			order := slices.Clone(ids)
			if s == 1 {
				slices.Reverse(order)
			}
			b := &persistence.Batch{Source: "jobs", Unit: l.Unit, Lease: l, Table: "jobs", Dedupe: true}
			for _, id := range order {
				b.Ops = append(b.Ops, withID(upsert(id, fmt.Sprintf(`{"by":%d}`, s), id), id))
			}
			batches[s] = b
		}
		applied := make([]persistence.Applied, 2)
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for s := range batches {
			wg.Go(func() { applied[s], errs[s] = e.s.Apply(e.ctx, batches[s]) })
		}
		wg.Wait()
		for s, err := range errs {
			if err != nil {
				e.t.Fatalf("round %d: slot %d: %v", r, s, err)
			}
		}
		if got := applied[0].Upserted + applied[1].Upserted; got != n {
			e.t.Errorf("round %d: %d + %d upserted, want %d in all", r, applied[0].Upserted, applied[1].Upserted, n)
		}
		dup := append(slices.Clone(applied[0].Duplicates), applied[1].Duplicates...)
		slices.Sort(dup)
		if !slices.Equal(dup, ids) {
			e.t.Errorf("round %d: duplicates %d + %d, want each id refused exactly once", r,
				len(applied[0].Duplicates), len(applied[1].Duplicates))
		}
	}
	if got := len(e.records("jobs")); got != rounds*n {
		e.t.Errorf("%d records, want %d", got, rounds*n)
	}
}
