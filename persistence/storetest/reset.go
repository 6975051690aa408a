package storetest

import (
	"errors"
	"time"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/persistence"
)

func (e *env) reset(l persistence.Lease, pos string) {
	e.t.Helper()
	e.apply(&persistence.Batch{Source: "orders", Unit: l.Unit, Lease: l, Checkpoint: pos, Reset: true})
}

// A resolved start is written as a marker, which orders before every
// position: the first batch moves the checkpoint forward from it, "0"
// included.
func testResetToMarker(e *env) {
	l := e.acquire("orders/0", "node-1")
	e.reset(l, brokers.MarkerBeginning) // creates the row
	if c := e.wantCheckpoint("orders/0", brokers.MarkerBeginning, false); c.Token != l.Token || c.Source != "orders" {
		e.t.Errorf("checkpoint = %+v, want token %d and source orders", c, l.Token)
	}
	e.cp(l, "0", false)
	e.wantCheckpoint("orders/0", "0", false)
	e.cp(l, brokers.MarkerBeginning, false) // a marker is before every position
	e.wantCheckpoint("orders/0", "0", false)

	// Markers order among themselves as text, and after the empty position.
	at := brokers.StartPosition(brokers.Start{At: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)})
	l1 := e.acquire("orders/1", "node-1")
	e.reset(l1, brokers.MarkerBeginning)
	e.cp(l1, at, false) // "@at:…" < "@beginning"
	e.wantCheckpoint("orders/1", brokers.MarkerBeginning, false)
	e.reset(l1, at)
	e.wantCheckpoint("orders/1", at, false)
	e.cp(l1, brokers.MarkerBeginning, false)
	e.wantCheckpoint("orders/1", brokers.MarkerBeginning, false)
	e.cp(l1, "00", false)
	e.wantCheckpoint("orders/1", "00", false)
	e.cp(l1, "abc", false) // text after decimals
	e.wantCheckpoint("orders/1", "abc", false)
}

func testResetBackwards(e *env) {
	l := e.acquire("orders/0", "node-1")
	e.cp(l, "100", false)
	l2 := e.acquire("orders/0", "node-2", "node-2")
	e.advance(time.Second)
	at := e.now()
	e.reset(l2, "5")
	c := e.wantCheckpoint("orders/0", "5", false)
	if c.Token != l2.Token {
		e.t.Errorf("checkpoint token = %d, want the resetter's %d", c.Token, l2.Token)
	}
	e.wantTime("checkpoint UpdatedAt", c.UpdatedAt, at)
	e.cp(l2, "4", false) // forward only again
	e.wantCheckpoint("orders/0", "5", false)
	e.cp(l2, "6", false)
	e.wantCheckpoint("orders/0", "6", false)
	e.advance(time.Second)
	e.reset(l2, "6") // to where it is: rewritten
	if c := e.wantCheckpoint("orders/0", "6", false); e.clk != nil && !c.UpdatedAt.Equal(e.now()) {
		e.t.Errorf("a reset to the stored position was not written: UpdatedAt %s, want %s", c.UpdatedAt, e.now())
	}
}

func testResetFinished(e *env) {
	l := e.acquire("shards/0", "node-1")
	e.cp(l, "10", true)
	e.wantCheckpoint("shards/0", "10", true)
	e.reset(l, "3")
	e.wantCheckpoint("shards/0", "3", false) // Finished cleared
	e.cp(l, "3", true)
	e.wantCheckpoint("shards/0", "3", true)
}

// A reset rides in a batch like any checkpoint: the batch's records commit
// with it, on every write path.
func testResetWithRecords(e *env) {
	for _, k := range []batchKind{streamBatch, queueBatch} {
		l := e.acquire("orders/0", "node-1")
		e.seed(l)
		e.cp(l, "900", false)
		b := k.make(l, "5")
		b.Checkpoint, b.Reset = "7", true
		a := e.apply(b)
		if a.Upserted+a.Unchanged != 2 || a.Deleted != 1 || a.DeadLettered != 1 {
			e.t.Errorf("dedupe %v: applied %+v, want 2 upserts, 1 deletion, 1 dead letter", k.dedupe, a)
		}
		e.wantCheckpoint("orders/0", "7", false)
		if _, ok := e.records("orders")["a"]; !ok {
			e.t.Errorf("dedupe %v: the batch's records were not written", k.dedupe)
		}
	}
}

func testResetEmpty(e *env) {
	l := e.acquire("orders/0", "node-1")
	e.cp(l, "10", false)
	_, err := e.s.Apply(e.ctx, &persistence.Batch{Source: "orders", Unit: l.Unit, Lease: l, Table: "orders",
		Ops: []persistence.Op{upsert("a", `{}`, "11")}, Reset: true})
	if err == nil || errors.Is(err, persistence.ErrLeaseLost) {
		e.t.Fatalf("a reset to an empty checkpoint: err = %v, want it refused", err)
	}
	e.wantCheckpoint("orders/0", "10", false)
	if rs := e.records("orders"); len(rs) != 0 {
		e.t.Errorf("the refused batch wrote records %v", rs)
	}
}

func testResetFenced(e *env) {
	old := e.acquire("orders/0", "node-1")
	e.cp(old, "10", false)
	e.acquire("orders/0", "node-2", "node-2")
	_, err := e.s.Apply(e.ctx, &persistence.Batch{Source: "orders", Unit: old.Unit, Lease: old, Checkpoint: "1", Reset: true})
	if !errors.Is(err, persistence.ErrLeaseLost) {
		e.t.Fatalf("a reset with a stale token: err = %v, want ErrLeaseLost", err)
	}
	e.wantCheckpoint("orders/0", "10", false)
	_, err = e.s.Apply(e.ctx, &persistence.Batch{Source: "orders", Unit: "orders/9",
		Lease: persistence.Lease{Unit: "orders/9", Owner: "node-1", Token: 1}, Checkpoint: brokers.MarkerBeginning, Reset: true})
	if !errors.Is(err, persistence.ErrLeaseLost) {
		e.t.Fatalf("a reset without a lease row: err = %v, want ErrLeaseLost", err)
	}
	if _, ok := e.checkpoint("orders/9"); ok {
		e.t.Error("a reset without a lease created a checkpoint")
	}
}

// A Reset records the batch's StreamID with the checkpoint; batches
// without Reset keep it, whoever writes them, and so does a Reset without
// one (a seek).
func testResetStreamID(e *env) {
	l := e.acquire("orders/0", "node-1")
	e.apply(&persistence.Batch{Source: "orders", Unit: l.Unit, Lease: l, Checkpoint: "3", Reset: true, StreamID: "topic-a"})
	if c := e.wantCheckpoint("orders/0", "3", false); c.StreamID != "topic-a" {
		e.t.Errorf("after a reset with a stream id: StreamID = %q, want topic-a", c.StreamID)
	}
	e.cp(l, "7", false)
	l2 := e.acquire("orders/0", "node-2", "node-2")
	e.cp(l2, "9", false)
	if c := e.wantCheckpoint("orders/0", "9", false); c.StreamID != "topic-a" {
		e.t.Errorf("after batches without reset: StreamID = %q, want topic-a kept", c.StreamID)
	}
	cps, err := e.s.Checkpoints(e.ctx, "orders")
	if err != nil || len(cps) != 1 || cps[0].StreamID != "topic-a" {
		e.t.Errorf("Checkpoints = %+v, %v; want one with StreamID topic-a", cps, err)
	}
	e.apply(&persistence.Batch{Source: "orders", Unit: l2.Unit, Lease: l2, Checkpoint: "0", Reset: true, StreamID: "topic-b"})
	if c := e.wantCheckpoint("orders/0", "0", false); c.StreamID != "topic-b" {
		e.t.Errorf("after a reset to another stream: StreamID = %q, want topic-b", c.StreamID)
	}
	e.reset(l2, "2")
	if c := e.wantCheckpoint("orders/0", "2", false); c.StreamID != "topic-b" {
		e.t.Errorf("after a reset without a stream id (a seek): StreamID = %q, want topic-b kept", c.StreamID)
	}
}
