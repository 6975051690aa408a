package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/drover-dev/drover/persistence"
)

// fullBatch writes to every part of the store: records, a deletion, a dead
// letter, dedupe ids and the checkpoint.
func fullBatch(l persistence.Lease, pos string) *persistence.Batch {
	return &persistence.Batch{
		Source: "orders", Unit: l.Unit, Lease: l, Table: "orders", Dedupe: true,
		Ops: []persistence.Op{
			withID(upsert("a", `{"id":"a","n":1}`, pos+"1"), "m-"+pos+"1"),
			withID(upsert("b", `{"id":"b","n":2}`, pos+"2"), "m-"+pos+"2"),
			withID(del("gone", pos+"3"), "m-"+pos+"3"),
			withID(dead(pos+"4", "not JSON"), "m-"+pos+"4"),
		},
		Checkpoint: pos + "4",
	}
}

// batchKind makes a batch that writes to every part of the store its path
// touches, and says whether it records dedupe ids.
type batchKind struct {
	make   func(l persistence.Lease, pos string) *persistence.Batch
	dedupe bool
}

var (
	queueBatch  = batchKind{fullBatch, true}
	streamBatch = batchKind{streamFullBatch, false}
)

// streamFullBatch is fullBatch as a stream writes it: no dedupe ids.
func streamFullBatch(l persistence.Lease, pos string) *persistence.Batch {
	b := fullBatch(l, pos)
	b.Dedupe = false
	for i := range b.Ops {
		b.Ops[i].MessageID = ""
	}
	return b
}

// dedupePos is the position whose dedupe ids wantUnchanged checks; "" for
// batches that record none.
func (k batchKind) dedupePos(pos string) string {
	if k.dedupe {
		return pos
	}
	return ""
}

// seed writes "gone" so that fullBatch has something to delete.
func (e *env) seed(l persistence.Lease) {
	e.t.Helper()
	e.apply(&persistence.Batch{Source: "orders", Unit: l.Unit, Lease: l, Table: "orders",
		Ops: []persistence.Op{upsert("gone", `{"id":"gone"}`, "1")}, Checkpoint: "1"})
}

func testApplyTogether(e *env) {
	l := e.acquire("orders/0", "node-1")
	e.seed(l)
	e.advance(time.Second)
	at := e.now()
	a := e.apply(fullBatch(l, "5"))
	if a.Upserted != 2 || a.Deleted != 1 || a.DeadLettered != 1 || a.Unchanged != 0 || len(a.Duplicates) != 0 {
		e.t.Errorf("applied = %+v, want 2 upserted, 1 deleted, 1 dead-lettered", a)
	}
	e.wantDocs("orders", map[string]string{"a": `{"id":"a","n":1}`, "b": `{"id":"b","n":2}`})
	r := e.records("orders")["a"]
	if r.Source != "orders" || r.Unit != "orders/0" || r.Position != "51" {
		e.t.Errorf("record a = %+v, want source orders, unit orders/0, position 51", r)
	}
	e.wantTime("record UpdatedAt", r.UpdatedAt, at)
	c, ok := e.checkpoint("orders/0")
	if !ok || c.Position != "54" || c.Source != "orders" || c.Token != l.Token {
		e.t.Errorf("checkpoint = %+v (found %v), want 54 from source orders with token %d", c, ok, l.Token)
	}
	e.wantTime("checkpoint UpdatedAt", c.UpdatedAt, at)
	ds := e.deadLetters(persistence.DeadLetterFilter{})
	if len(ds) != 1 || ds[0].Position != "54" || ds[0].Reason != "not JSON" {
		e.t.Errorf("dead letters = %+v, want one at 54", ds)
	}
	// The dedupe ids were recorded: the same batch again is all duplicates.
	a = e.apply(fullBatch(l, "5"))
	if len(a.Duplicates) != 4 || a.Upserted+a.Deleted+a.DeadLettered != 0 {
		e.t.Errorf("re-applied = %+v, want 4 duplicates and nothing else", a)
	}
}

// snapshot is everything a batch could change.
type snapshot struct {
	records     map[string]persistence.Record
	checkpoint  persistence.Checkpoint
	deadLetters []persistence.DeadLetter
}

func (e *env) snapshot(table, unit string) snapshot {
	e.t.Helper()
	c, _ := e.checkpoint(unit)
	return snapshot{e.records(table), c, e.deadLetters(persistence.DeadLetterFilter{})}
}

// wantUnchanged checks that nothing changed since before and that the dedupe
// ids of fullBatch(_, pos) were not recorded.
func (e *env) wantUnchanged(before snapshot, table, unit string, l persistence.Lease, pos string) {
	e.t.Helper()
	after := e.snapshot(table, unit)
	if len(after.records) != len(before.records) {
		e.t.Errorf("records: %d rows, want %d", len(after.records), len(before.records))
	}
	for k, r := range before.records {
		if a, ok := after.records[k]; !ok || !sameJSON(a.Doc, r.Doc) || !a.UpdatedAt.Equal(r.UpdatedAt) {
			e.t.Errorf("record %q = %+v, want %+v", k, a, r)
		}
	}
	for k := range after.records {
		if _, ok := before.records[k]; !ok {
			e.t.Errorf("record %q was written", k)
		}
	}
	if after.checkpoint.Position != before.checkpoint.Position || after.checkpoint.Token != before.checkpoint.Token {
		e.t.Errorf("checkpoint = %+v, want %+v", after.checkpoint, before.checkpoint)
	}
	if len(after.deadLetters) != len(before.deadLetters) {
		e.t.Errorf("dead letters: %d, want %d", len(after.deadLetters), len(before.deadLetters))
	}
	if pos != "" {
		a := e.apply(fullBatch(l, pos))
		if len(a.Duplicates) != 0 {
			e.t.Errorf("dedupe ids %v were recorded by a batch that failed", a.Duplicates)
		}
	}
}

func testApplyStale(k batchKind) func(*env) {
	return func(e *env) {
		old := e.acquire("orders/0", "node-1")
		e.seed(old)
		cur := e.acquire("orders/0", "node-2", "node-2") // node-1 is not live
		before := e.snapshot("orders", "orders/0")
		_, err := e.s.Apply(e.ctx, k.make(old, "5"))
		if !errors.Is(err, persistence.ErrLeaseLost) {
			e.t.Fatalf("apply with a stale token: err = %v, want ErrLeaseLost", err)
		}
		e.wantUnchanged(before, "orders", "orders/0", cur, k.dedupePos("5"))
	}
}

func testApplyNoLease(k batchKind) func(*env) {
	return func(e *env) { testApplyNoLeaseWith(e, k) }
}

func testApplyNoLeaseWith(e *env, k batchKind) {
	l := persistence.Lease{Unit: "orders/7", Owner: "node-1", Token: 1}
	_, err := e.s.Apply(e.ctx, k.make(l, "5"))
	if !errors.Is(err, persistence.ErrLeaseLost) {
		e.t.Fatalf("apply without a lease row: err = %v, want ErrLeaseLost", err)
	}
	if rs := e.records("orders"); len(rs) != 0 {
		e.t.Errorf("records written without a lease: %v", rs)
	}
	if _, ok := e.checkpoint("orders/7"); ok {
		e.t.Error("checkpoint written without a lease")
	}
}

func testHandlerError(e *env) {
	l := e.acquire("orders/0", "node-1")
	e.seed(l)
	before := e.snapshot("orders", "orders/0")
	boom := errors.New("handler failed")
	b := fullBatch(l, "5")
	b.Ops = append(b.Ops, msg("m-56"))
	b.Handle = func(ctx context.Context, tx persistence.Tx, ops []persistence.Op) error {
		if err := tx.Put(ctx, "orders", "from-handler", []byte(`{"h":1}`)); err != nil {
			return err
		}
		if err := tx.Delete(ctx, "orders", "a"); err != nil {
			return err
		}
		return boom
	}
	_, err := e.s.Apply(e.ctx, b)
	if !errors.Is(err, boom) {
		e.t.Fatalf("apply: err = %v, want the handler's error", err)
	}
	e.wantUnchanged(before, "orders", "orders/0", l, "5")
}

func testInvalidDoc(k batchKind) func(*env) {
	return func(e *env) {
		l := e.acquire("orders/0", "node-1")
		e.seed(l)
		before := e.snapshot("orders", "orders/0")
		b := k.make(l, "5")
		b.Ops = append(b.Ops, upsert("z", `{"broken":`, "55"))
		b.Checkpoint = "55"
		if _, err := e.s.Apply(e.ctx, b); err == nil {
			e.t.Fatal("apply of an invalid JSON document: no error")
		}
		e.wantUnchanged(before, "orders", "orders/0", l, k.dedupePos("5"))
	}
}

func testInvalidTable(e *env) {
	l := e.acquire("orders/0", "node-1")
	for _, table := range []string{"drover_leases", `x"; DROP TABLE drover_leases; --`, ""} {
		b := fullBatch(l, "5")
		b.Table = table
		if _, err := e.s.Apply(e.ctx, b); err == nil {
			e.t.Errorf("apply to table %q: no error", table)
		}
	}
	if _, ok := e.checkpoint("orders/0"); ok {
		e.t.Error("a refused batch wrote its checkpoint")
	}
	if got := e.leases()["orders/0"]; got.Token != l.Token {
		e.t.Errorf("lease = %+v, want it intact", got)
	}
}

func testFailMidTx(k batchKind) func(*env) {
	return func(e *env) {
		l := e.acquire("orders/0", "node-1")
		e.seed(l)
		before := e.snapshot("orders", "orders/0")
		e.h.FailMidTx(e.t, e.s)
		if _, err := e.s.Apply(e.ctx, k.make(l, "5")); err == nil {
			e.t.Fatal("apply with a fault in the middle: no error")
		}
		e.wantUnchanged(before, "orders", "orders/0", l, k.dedupePos("5"))
	}
}

// testTakeoverDuringApply takes the unit over while a batch is inside its
// transaction. Either the store makes the takeover wait for the batch (it
// completes after the commit) or the batch must fail with ErrLeaseLost; a
// batch that commits although the takeover completed first is a fencing bug.
func testTakeoverDuringApply(e *env) {
	old := e.acquire("orders/0", "node-1")
	type acquired struct {
		l   persistence.Lease
		err error
	}
	done := make(chan acquired, 1)
	var tookOverInside, handled bool
	b := &persistence.Batch{Source: "orders", Unit: "orders/0", Lease: old, Table: "orders",
		Ops: []persistence.Op{upsert("a", `{"zombie":true}`, "1"), msg("m-1")}, Checkpoint: "1"}
	b.Handle = func(ctx context.Context, tx persistence.Tx, ops []persistence.Op) error {
		handled = true
		go func() {
			l, err := e.s.Acquire(context.WithoutCancel(ctx), persistence.AcquireRequest{
				Unit: "orders/0", Owner: "node-2", TTL: longTTL, Live: []string{"node-2"},
			})
			done <- acquired{l, err}
		}()
		// Give the takeover a moment to finish inside the transaction; a
		// store that blocks it until the commit is just as correct.
		select {
		case r := <-done:
			done <- r
			tookOverInside = true
		case <-time.After(200 * time.Millisecond):
		}
		return nil
	}
	_, applyErr := e.s.Apply(e.ctx, b)
	if !handled {
		e.t.Fatalf("apply failed before its handler ran (the takeover never started): %v", applyErr)
	}
	var r acquired
	select {
	case r = <-done:
	case <-time.After(time.Minute):
		e.t.Fatal("the takeover did not finish within a minute of the commit")
	}
	if r.err != nil {
		e.t.Fatalf("takeover: %v", r.err)
	}
	if r.l.Token != old.Token+1 {
		e.t.Errorf("takeover token = %d, want %d", r.l.Token, old.Token+1)
	}
	if tookOverInside && applyErr == nil {
		e.t.Fatal("the takeover completed inside the transaction and the stale batch still committed")
	}
	if applyErr != nil && !errors.Is(applyErr, persistence.ErrLeaseLost) {
		e.t.Fatalf("apply: err = %v, want nil or ErrLeaseLost", applyErr)
	}
	if applyErr != nil {
		if rs := e.records("orders"); len(rs) != 0 {
			e.t.Errorf("the fenced batch left records %v", rs)
		}
	}
}

// testConcurrentApplies runs read-modify-write handlers of one unit from
// several goroutines: applies of a unit must serialise, so no increment is
// lost.
func testConcurrentApplies(e *env) {
	l := e.acquire("counter/0", "node-1")
	const workers, rounds = 4, 10
	errs := make(chan error, workers*rounds)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				b := &persistence.Batch{Source: "counter", Unit: "counter/0", Lease: l,
					Ops: []persistence.Op{msg("x")}}
				b.Handle = func(ctx context.Context, tx persistence.Tx, ops []persistence.Op) error {
					n, err := readCounter(ctx, tx)
					if err != nil {
						return err
					}
					return tx.Put(ctx, "counters", "c", counterDoc(n+1))
				}
				if _, err := e.s.Apply(e.ctx, b); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		e.t.Errorf("apply: %v", err)
	}
	r, ok := e.records("counters")["c"]
	if !ok {
		e.t.Fatal("counter missing")
	}
	if want := counterDoc(workers * rounds); !sameJSON(r.Doc, want) {
		e.t.Errorf("counter = %s, want %s: an increment was lost", r.Doc, want)
	}
}

func testHandlerTx(e *env) {
	l := e.acquire("jobs/slot-0", "node-1")
	e.apply(&persistence.Batch{Source: "jobs", Unit: "jobs/slot-0", Lease: l, Table: "jobs",
		Ops: []persistence.Op{upsert("old", `{"v":"old"}`, "1"), upsert("doomed", `{"v":"doomed"}`, "2")}})
	var sawOld, sawOwn, sawDeleted bool
	var handled []string
	b := &persistence.Batch{Source: "jobs", Unit: "jobs/slot-0", Lease: l, Dedupe: true,
		Ops: []persistence.Op{msg("m-1"), msg("m-2")}}
	b.Handle = func(ctx context.Context, tx persistence.Tx, ops []persistence.Op) error {
		for _, op := range ops {
			handled = append(handled, op.MessageID)
		}
		doc, ok, err := tx.Get(ctx, "jobs", "old")
		if err != nil {
			return err
		}
		sawOld = ok && sameJSON(doc, []byte(`{"v":"old"}`))
		if err := tx.Put(ctx, "jobs", "new", []byte(`{"v":"new"}`)); err != nil {
			return err
		}
		doc, ok, err = tx.Get(ctx, "jobs", "new")
		if err != nil {
			return err
		}
		sawOwn = ok && sameJSON(doc, []byte(`{"v":"new"}`))
		if err := tx.Delete(ctx, "jobs", "doomed"); err != nil {
			return err
		}
		_, ok, err = tx.Get(ctx, "jobs", "doomed")
		if err != nil {
			return err
		}
		sawDeleted = !ok
		// A second table, created on first use inside the transaction.
		return tx.Put(ctx, "audit", "m-1", []byte(`{"seen":true}`))
	}
	a := e.apply(b)
	if a.Handled != 2 || !slices.Equal(handled, []string{"m-1", "m-2"}) {
		e.t.Errorf("handled %v (Applied.Handled %d), want [m-1 m-2]", handled, a.Handled)
	}
	if !sawOld || !sawOwn || !sawDeleted {
		e.t.Errorf("inside the transaction: saw stored %v, own write %v, own delete %v; want all true", sawOld, sawOwn, sawDeleted)
	}
	e.wantDocs("jobs", map[string]string{"old": `{"v":"old"}`, "new": `{"v":"new"}`})
	e.wantDocs("audit", map[string]string{"m-1": `{"seen":true}`})
	if r := e.records("jobs")["new"]; r.Source != "jobs" || r.Unit != "jobs/slot-0" {
		e.t.Errorf("handler's record = %+v, want source jobs, unit jobs/slot-0", r)
	}

	// Exec: SQL stores run it in the transaction, memory refuses it.
	b = &persistence.Batch{Source: "jobs", Unit: "jobs/slot-0", Lease: l, Ops: []persistence.Op{msg("m-3")}}
	b.Handle = func(ctx context.Context, tx persistence.Tx, ops []persistence.Op) error {
		_, err := tx.Exec(ctx, "SELECT 1")
		if err != nil && !errors.Is(err, persistence.ErrUnsupported) {
			return err
		}
		return nil
	}
	e.apply(b)
}

func testHandlerFresh(e *env) {
	l := e.acquire("jobs/slot-0", "node-1")
	var got [][]string
	handle := func(ctx context.Context, tx persistence.Tx, ops []persistence.Op) error {
		var ids []string
		for _, op := range ops {
			ids = append(ids, op.MessageID)
		}
		got = append(got, ids)
		return nil
	}
	b := &persistence.Batch{Source: "jobs", Unit: "jobs/slot-0", Lease: l, Dedupe: true,
		Ops: []persistence.Op{msg("m-1"), msg("m-2")}, Handle: handle}
	e.apply(b)
	b.Ops = []persistence.Op{msg("m-2"), msg("m-3")}
	a := e.apply(b)
	if !slices.Equal(a.Duplicates, []string{"m-2"}) || a.Handled != 1 {
		e.t.Errorf("second batch: %+v, want duplicate m-2 and 1 handled", a)
	}
	b.Ops = []persistence.Op{msg("m-1")}
	a = e.apply(b)
	if a.Handled != 0 || len(a.Duplicates) != 1 {
		e.t.Errorf("all-duplicate batch: %+v, want nothing handled", a)
	}
	if want := [][]string{{"m-1", "m-2"}, {"m-3"}}; len(got) != 2 || !slices.Equal(got[0], want[0]) || !slices.Equal(got[1], want[1]) {
		e.t.Errorf("handler calls %v, want %v (no call without fresh messages)", got, want)
	}
}

func testHandlerFenced(e *env) {
	old := e.acquire("jobs/slot-0", "node-1")
	e.acquire("jobs/slot-0", "node-2", "node-2")
	called := false
	b := &persistence.Batch{Source: "jobs", Unit: "jobs/slot-0", Lease: old, Ops: []persistence.Op{msg("m-1")},
		Handle: func(context.Context, persistence.Tx, []persistence.Op) error { called = true; return nil }}
	if _, err := e.s.Apply(e.ctx, b); !errors.Is(err, persistence.ErrLeaseLost) {
		e.t.Errorf("apply with a stale token: err = %v, want ErrLeaseLost", err)
	}
	if called {
		e.t.Error("the handler ran although the batch was fenced off")
	}
}

func testNoHandle(e *env) {
	l := e.acquire("jobs/slot-0", "node-1")
	b := &persistence.Batch{Source: "jobs", Unit: "jobs/slot-0", Lease: l, Table: "jobs",
		Ops: []persistence.Op{upsert("a", `{}`, "1"), msg("m-1")}, Checkpoint: "1"}
	if _, err := e.s.Apply(e.ctx, b); err == nil {
		e.t.Fatal("a batch with message ops and no Handle: no error")
	}
	if rs := e.records("jobs"); len(rs) != 0 {
		e.t.Errorf("records written by a refused batch: %v", rs)
	}
}

func readCounter(ctx context.Context, tx persistence.Tx) (int, error) {
	doc, ok, err := tx.Get(ctx, "counters", "c")
	if err != nil || !ok {
		return 0, err
	}
	var v struct{ N int }
	if err := json.Unmarshal(doc, &v); err != nil {
		return 0, err
	}
	return v.N, nil
}

func counterDoc(n int) []byte { return []byte(fmt.Sprintf(`{"n":%d}`, n)) }
