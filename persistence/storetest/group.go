package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/drover-dev/drover/persistence"
)

// Group commit (persistence.GroupApplier): every batch of a group has the
// outcome Apply would give it alone. A store without ApplyGroup does not
// run these.

func (e *env) group() persistence.GroupApplier {
	e.t.Helper()
	g, ok := e.s.(persistence.GroupApplier)
	if !ok {
		e.t.Skip("the store has no ApplyGroup")
	}
	return g
}

// unitBatch is a batch of unit i of source orders that touches every part
// of the store its kind's path writes, with keys and message ids of that
// unit only.
func unitBatch(k batchKind, l persistence.Lease, i int, pos string) *persistence.Batch {
	u := fmt.Sprintf("u%d-", i)
	b := &persistence.Batch{
		Source: "orders", Unit: l.Unit, Lease: l, Table: "orders", Dedupe: k.dedupe,
		Ops: []persistence.Op{
			upsert(u+"a", fmt.Sprintf(`{"unit":%d,"n":1}`, i), pos+"1"),
			upsert(u+"b", fmt.Sprintf(`{"unit":%d,"n":2}`, i), pos+"2"),
			del(u+"gone", pos+"3"),
			dead(pos+"4", "not JSON"),
		},
		Checkpoint: pos + "4",
	}
	if k.dedupe {
		for j := range b.Ops {
			b.Ops[j].MessageID = fmt.Sprintf("m-%s%s", u, b.Ops[j].Position)
		}
	}
	return b
}

// groupOfThree takes the leases of orders/0..2 and writes each unit's
// "gone" record (so that the table exists and the deletions delete).
func (e *env) groupOfThree() []persistence.Lease {
	e.t.Helper()
	return e.groupOf(3)
}

// groupOf is groupOfThree for orders/0..n-1.
func (e *env) groupOf(n int) []persistence.Lease {
	e.t.Helper()
	ls := make([]persistence.Lease, n)
	for i := range ls {
		ls[i] = e.acquire(fmt.Sprintf("orders/%d", i), "node-1")
		e.apply(&persistence.Batch{Source: "orders", Unit: ls[i].Unit, Lease: ls[i], Table: "orders",
			Ops: []persistence.Op{upsert(fmt.Sprintf("u%d-gone", i), `{}`, "1")}, Checkpoint: "1"})
	}
	return ls
}

// wantUnitApplied checks that unit i's unitBatch(…, pos) is in the store.
func (e *env) wantUnitApplied(i int, pos string, r persistence.GroupResult) {
	e.t.Helper()
	if r.Err != nil {
		e.t.Errorf("batch of orders/%d: %v", i, r.Err)
		return
	}
	if a := r.Applied; a.Upserted != 2 || a.Deleted != 1 || a.DeadLettered != 1 || len(a.Duplicates) != 0 {
		e.t.Errorf("batch of orders/%d applied %+v, want 2 upserted, 1 deleted, 1 dead-lettered", i, a)
	}
	recs := e.records("orders")
	u := fmt.Sprintf("u%d-", i)
	if _, ok := recs[u+"a"]; !ok {
		e.t.Errorf("record %sa of orders/%d missing", u, i)
	}
	if _, ok := recs[u+"gone"]; ok {
		e.t.Errorf("record %sgone of orders/%d not deleted", u, i)
	}
	if c, ok := e.checkpoint(fmt.Sprintf("orders/%d", i)); !ok || c.Position != pos+"4" {
		e.t.Errorf("checkpoint of orders/%d = %+v, want %s4", i, c, pos)
	}
}

// wantUnitUntouched checks that nothing of unit i's unitBatch was written.
func (e *env) wantUnitUntouched(i int) {
	e.t.Helper()
	unit := fmt.Sprintf("orders/%d", i)
	recs := e.records("orders")
	u := fmt.Sprintf("u%d-", i)
	for _, k := range []string{u + "a", u + "b"} {
		if _, ok := recs[k]; ok {
			e.t.Errorf("record %s of %s was written", k, unit)
		}
	}
	if _, ok := recs[u+"gone"]; !ok {
		e.t.Errorf("record %sgone of %s was deleted", u, unit)
	}
	if c, _ := e.checkpoint(unit); c.Position != "1" {
		e.t.Errorf("checkpoint of %s = %q, want 1 (as seeded)", unit, c.Position)
	}
	for _, d := range e.deadLetters(persistence.DeadLetterFilter{}) {
		if d.Unit == unit {
			e.t.Errorf("dead letter of %s written: %+v", unit, d)
		}
	}
}

// testGroupLostLease: the middle batch of three lost its lease; the other
// two commit, nothing of it is written (its dedupe ids neither).
func testGroupLostLease(k batchKind) func(*env) {
	return func(e *env) {
		g := e.group()
		ls := e.groupOfThree()
		cur := e.acquire("orders/1", "node-2", "node-2") // node-1 is not live: taken over
		bs := []*persistence.Batch{unitBatch(k, ls[0], 0, "5"), unitBatch(k, ls[1], 1, "5"), unitBatch(k, ls[2], 2, "5")}
		res := g.ApplyGroup(e.ctx, bs)
		if len(res) != 3 {
			e.t.Fatalf("ApplyGroup of 3 batches gave %d results", len(res))
		}
		e.wantUnitApplied(0, "5", res[0])
		e.wantUnitApplied(2, "5", res[2])
		if !errors.Is(res[1].Err, persistence.ErrLeaseLost) {
			e.t.Errorf("batch with a lost lease: err = %v, want ErrLeaseLost", res[1].Err)
		}
		e.wantUnitUntouched(1)
		if k.dedupe {
			a := e.apply(unitBatch(k, cur, 1, "5"))
			if len(a.Duplicates) != 0 {
				e.t.Errorf("dedupe ids %v were recorded by the fenced batch", a.Duplicates)
			}
		}
	}
}

// testGroupRefused: a record the store refuses fails its own batch with
// ErrPermanent; the others commit.
func testGroupRefused(k batchKind) func(*env) {
	return func(e *env) {
		g := e.group()
		ls := e.groupOfThree()
		e.h.Refuse(e.t, e.s, "orders")
		bs := []*persistence.Batch{unitBatch(k, ls[0], 0, "5"), unitBatch(k, ls[1], 1, "5"), unitBatch(k, ls[2], 2, "5")}
		bad := upsert("u1-bad", `{"bad":true}`, "55")
		if k.dedupe {
			bad.MessageID = "m-u1-55"
		}
		bs[1].Ops = append(bs[1].Ops, bad)
		bs[1].Checkpoint = "55"
		res := g.ApplyGroup(e.ctx, bs)
		e.wantUnitApplied(0, "5", res[0])
		e.wantUnitApplied(2, "5", res[2])
		if err := res[1].Err; !persistence.Permanent(err) || errors.Is(err, persistence.ErrLeaseLost) {
			e.t.Errorf("batch with a refused record: err = %v, want ErrPermanent", err)
		}
		e.wantUnitUntouched(1)
	}
}

// testGroupSeveralFailures: in a group of five, the first and fourth
// batches are refused after writing part of themselves and the third lost
// its lease; each fails alone, and the second and fifth commit once, with
// their own counts (a store that runs a group again after a failure must
// not count or write a batch twice).
func testGroupSeveralFailures(k batchKind) func(*env) {
	return func(e *env) {
		g := e.group()
		ls := e.groupOf(5)
		e.h.Refuse(e.t, e.s, "orders")
		e.acquire("orders/2", "node-2", "node-2") // node-1 is not live: taken over
		bs := make([]*persistence.Batch, 5)
		for i := range bs {
			bs[i] = unitBatch(k, ls[i], i, "5")
		}
		for _, i := range []int{0, 3} {
			bad := upsert(fmt.Sprintf("u%d-bad", i), `{"bad":true}`, "55")
			if k.dedupe {
				bad.MessageID = fmt.Sprintf("m-u%d-55", i)
			}
			bs[i].Ops = append(bs[i].Ops, bad)
			bs[i].Checkpoint = "55"
		}
		res := g.ApplyGroup(e.ctx, bs)
		if len(res) != 5 {
			e.t.Fatalf("ApplyGroup of 5 batches gave %d results", len(res))
		}
		for _, i := range []int{0, 3} {
			if err := res[i].Err; !persistence.Permanent(err) || errors.Is(err, persistence.ErrLeaseLost) {
				e.t.Errorf("batch %d with a refused record: err = %v, want ErrPermanent", i, err)
			}
			e.wantUnitUntouched(i)
		}
		if !errors.Is(res[2].Err, persistence.ErrLeaseLost) {
			e.t.Errorf("batch with a lost lease: err = %v, want ErrLeaseLost", res[2].Err)
		}
		e.wantUnitUntouched(2)
		e.wantUnitApplied(1, "5", res[1])
		e.wantUnitApplied(4, "5", res[4])
		if k.dedupe {
			l0 := ls[0]
			a := e.apply(&persistence.Batch{Source: "orders", Unit: l0.Unit, Lease: l0, Table: "orders", Dedupe: true,
				Ops: []persistence.Op{withID(upsert("u0-again", `{"n":1}`, "56"), "m-u0-51"), withID(upsert("u1-again", `{"n":1}`, "57"), "m-u1-51")}})
			if !slices.Equal(a.Duplicates, []string{"m-u1-51"}) {
				e.t.Errorf("duplicates %v, want m-u1-51 only (the refused batch's ids were not recorded)", a.Duplicates)
			}
		}
	}
}

// testGroupDedupe: two slots of one source in one group carry the same
// message id: it is applied once; an id committed before the group is a
// duplicate.
func testGroupDedupe(e *env) {
	g := e.group()
	l0, l1 := e.acquire("jobs/slot-0", "node-1"), e.acquire("jobs/slot-1", "node-1")
	e.apply(&persistence.Batch{Source: "jobs", Unit: l0.Unit, Lease: l0, Table: "jobs", Dedupe: true,
		Ops: []persistence.Op{withID(upsert("old", `{"v":1}`, "m-0"), "m-0")}})
	b := func(l persistence.Lease, ops ...persistence.Op) *persistence.Batch {
		return &persistence.Batch{Source: "jobs", Unit: l.Unit, Lease: l, Table: "jobs", Dedupe: true, Ops: ops}
	}
	res := g.ApplyGroup(e.ctx, []*persistence.Batch{
		b(l0, withID(upsert("a", `{"v":1}`, "m-1"), "m-1"), withID(upsert("x", `{"v":1}`, "m-2"), "m-2")),
		b(l1, withID(upsert("a", `{"v":1}`, "m-1"), "m-1"), withID(upsert("old", `{"v":2}`, "m-0"), "m-0"),
			withID(upsert("y", `{"v":1}`, "m-3"), "m-3")),
	})
	for i, r := range res {
		if r.Err != nil {
			e.t.Fatalf("batch %d: %v", i, r.Err)
		}
	}
	dup0, dup1 := res[0].Applied.Duplicates, res[1].Applied.Duplicates
	if !slices.Contains(dup1, "m-0") || slices.Contains(dup0, "m-0") {
		e.t.Errorf("duplicates %v and %v: want m-0 (committed before) in the second only", dup0, dup1)
	}
	if slices.Contains(dup0, "m-1") == slices.Contains(dup1, "m-1") {
		e.t.Errorf("duplicates %v and %v: want m-1 (in both batches) in exactly one", dup0, dup1)
	}
	if slices.Contains(dup0, "m-2") || slices.Contains(dup1, "m-3") {
		e.t.Errorf("duplicates %v and %v: m-2 and m-3 are fresh", dup0, dup1)
	}
	e.wantDocs("jobs", map[string]string{"old": `{"v":1}`, "a": `{"v":1}`, "x": `{"v":1}`, "y": `{"v":1}`})
}

// testGroupSameUnitInOrder: two batches of one unit in a group are
// applied one after the other: the second's checkpoint and records win,
// and an id of the first is a duplicate in the second.
func testGroupSameUnitInOrder(e *env) {
	g := e.group()
	l := e.acquire("orders/0", "node-1")
	e.seed(l)
	first := &persistence.Batch{Source: "orders", Unit: l.Unit, Lease: l, Table: "orders", Dedupe: true, Checkpoint: "54",
		Ops: []persistence.Op{withID(upsert("a", `{"n":1}`, "54"), "m-54")}}
	second := &persistence.Batch{Source: "orders", Unit: l.Unit, Lease: l, Table: "orders", Dedupe: true, Checkpoint: "64",
		Ops: []persistence.Op{withID(upsert("b", `{"n":1}`, "60"), "m-54"), withID(upsert("a", `{"n":2}`, "64"), "m-64")}}
	res := g.ApplyGroup(e.ctx, []*persistence.Batch{first, second})
	if res[0].Err != nil || res[1].Err != nil {
		e.t.Fatalf("errors %v, %v", res[0].Err, res[1].Err)
	}
	if !slices.Equal(res[1].Applied.Duplicates, []string{"m-54"}) || res[1].Applied.Upserted != 1 {
		e.t.Errorf("second batch applied %+v, want m-54 a duplicate and 1 upserted", res[1].Applied)
	}
	e.wantDocs("orders", map[string]string{"gone": `{"id":"gone"}`, "a": `{"n":2}`})
	if c, _ := e.checkpoint("orders/0"); c.Position != "64" {
		e.t.Errorf("checkpoint = %q, want 64", c.Position)
	}
}

// testGroupHandler: a handler's batch in a group writes through its Tx; a
// failing handler rolls back its own batch only, its error as is.
func testGroupHandler(e *env) {
	g := e.group()
	ls := e.groupOfThree()
	boom := errors.New("handler failed")
	handled := unitBatch(streamBatch, ls[0], 0, "5")
	handled.Ops = append(handled.Ops, msg("56"))
	handled.Checkpoint = "56"
	handled.Handle = func(ctx context.Context, tx persistence.Tx, ops []persistence.Op) error {
		if len(ops) != 1 {
			return fmt.Errorf("%d ops handled, want 1", len(ops))
		}
		return tx.Put(ctx, "orders", "from-handler", []byte(`{"h":1}`))
	}
	failing := unitBatch(streamBatch, ls[1], 1, "5")
	failing.Ops = append(failing.Ops, msg("56"))
	failing.Handle = func(ctx context.Context, tx persistence.Tx, _ []persistence.Op) error {
		if err := tx.Put(ctx, "orders", "from-failing", []byte(`{"h":1}`)); err != nil {
			return err
		}
		return boom
	}
	res := g.ApplyGroup(e.ctx, []*persistence.Batch{handled, failing, unitBatch(streamBatch, ls[2], 2, "5")})
	if res[0].Err != nil || res[0].Applied.Handled != 1 {
		e.t.Errorf("handled batch: %+v, %v; want 1 handled", res[0].Applied, res[0].Err)
	}
	if !errors.Is(res[1].Err, boom) {
		e.t.Errorf("failing handler's batch: err = %v, want the handler's error", res[1].Err)
	}
	e.wantUnitApplied(2, "5", res[2])
	e.wantUnitUntouched(1)
	recs := e.records("orders")
	if _, ok := recs["from-handler"]; !ok {
		e.t.Error("the handler's write is missing")
	}
	if _, ok := recs["from-failing"]; ok {
		e.t.Error("the failing handler's write was committed")
	}
	if c, _ := e.checkpoint("orders/0"); c.Position != "56" {
		e.t.Errorf("checkpoint of the handled batch = %q, want 56", c.Position)
	}
}
