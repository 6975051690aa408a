package storetest

import (
	"errors"
	"time"

	"github.com/drover-dev/drover/persistence"
)

// seekdone.go: Batch.SeekDone marks a unit's control row's seek done, in
// the batch's fenced transaction (issue 13 item 2).

func (e *env) askSeek(unit, to string) persistence.Control {
	e.t.Helper()
	return e.setControl(persistence.ControlChange{Source: "orders", Unit: unit, Seek: to, Node: "node-2",
		Action: "seek", Args: "to=" + to, By: "ops", Reason: "rewind"})
}

func (e *env) seekDoneID(unit string) int64 {
	e.t.Helper()
	for _, c := range e.listControls() {
		if c.Unit == unit {
			return c.SeekDoneID
		}
	}
	e.t.Fatalf("no control row of %s", unit)
	return 0
}

// A seek's Reset checkpoint marks the row done with it; a batch with
// only SeekDone (a refused seek) marks it done and writes no checkpoint;
// the mark never goes back; a stale token writes nothing; a unit with no
// row gets none.
func testSeekDone(e *env) {
	l := e.acquire("orders/0", "node-1")
	e.cp(l, "100", false)
	e.askSeek("orders/0", "5")
	e.apply(&persistence.Batch{Source: "orders", Unit: "orders/0", Lease: l, Checkpoint: "5", Reset: true, SeekDone: 1})
	e.wantCheckpoint("orders/0", "5", false)
	if got := e.seekDoneID("orders/0"); got != 1 {
		e.t.Errorf("seek_done_id after the seek's checkpoint = %d, want 1", got)
	}

	// a refused seek: the mark alone
	e.askSeek("orders/0", "999999")
	e.apply(&persistence.Batch{Source: "orders", Unit: "orders/0", Lease: l, SeekDone: 2})
	e.wantCheckpoint("orders/0", "5", false)
	if got := e.seekDoneID("orders/0"); got != 2 {
		e.t.Errorf("seek_done_id after a refused seek = %d, want 2", got)
	}
	// a seek done already (an older id, or the same again) writes
	// nothing: ErrSeekDone, the checkpoint as it was
	for _, id := range []int64{1, 2} {
		_, err := e.s.Apply(e.ctx, &persistence.Batch{Source: "orders", Unit: "orders/0", Lease: l, Checkpoint: "50", Reset: true, SeekDone: id})
		if !errors.Is(err, persistence.ErrSeekDone) {
			e.t.Errorf("a seek of id %d with 2 done: %v, want ErrSeekDone", id, err)
		}
	}
	e.wantCheckpoint("orders/0", "5", false)
	if got := e.seekDoneID("orders/0"); got != 2 {
		e.t.Errorf("seek_done_id after an older mark = %d, want 2 kept", got)
	}

	// fenced: the unit moved; the old owner's seek writes nothing
	e.askSeek("orders/0", "7")
	l2 := e.acquire("orders/0", "node-2", "node-2")
	_, err := e.s.Apply(e.ctx, &persistence.Batch{Source: "orders", Unit: "orders/0", Lease: l, Checkpoint: "7", Reset: true, SeekDone: 3})
	if !errors.Is(err, persistence.ErrLeaseLost) {
		e.t.Fatalf("seek under a stale token: %v, want ErrLeaseLost", err)
	}
	_, err = e.s.Apply(e.ctx, &persistence.Batch{Source: "orders", Unit: "orders/0", Lease: l, SeekDone: 3})
	if !errors.Is(err, persistence.ErrLeaseLost) {
		e.t.Fatalf("a mark alone under a stale token: %v, want ErrLeaseLost", err)
	}
	e.wantCheckpoint("orders/0", "5", false)
	if got := e.seekDoneID("orders/0"); got != 2 {
		e.t.Errorf("seek_done_id after a stale token's seek = %d, want 2 kept", got)
	}
	// the new owner carries it out
	e.apply(&persistence.Batch{Source: "orders", Unit: "orders/0", Lease: l2, Checkpoint: "7", Reset: true, SeekDone: 3})
	e.wantCheckpoint("orders/0", "7", false)
	if got := e.seekDoneID("orders/0"); got != 3 {
		e.t.Errorf("seek_done_id after the new owner's seek = %d, want 3", got)
	}

	// no row: nothing is created; the checkpoint is written
	l3 := e.acquire("orders/1", "node-1")
	e.apply(&persistence.Batch{Source: "orders", Unit: "orders/1", Lease: l3, Checkpoint: "3", Reset: true, SeekDone: 1})
	e.wantCheckpoint("orders/1", "3", false)
	for _, c := range e.listControls() {
		if c.Unit == "orders/1" {
			e.t.Errorf("a mark created a control row: %+v", c)
		}
	}
}

// SeekDone in a group: each batch's mark commits or not with its own
// fence.
func testSeekDoneGroup(e *env) {
	g := e.group()
	l0 := e.acquire("orders/0", "node-1")
	l1 := e.acquire("orders/1", "node-1")
	e.askSeek("orders/0", "5")
	e.askSeek("orders/1", "5")
	e.acquire("orders/1", "node-2", "node-2") // l1 is stale now
	res := g.ApplyGroup(e.ctx, []*persistence.Batch{
		{Source: "orders", Unit: "orders/0", Lease: l0, Checkpoint: "5", Reset: true, SeekDone: 1},
		{Source: "orders", Unit: "orders/1", Lease: l1, Checkpoint: "5", Reset: true, SeekDone: 1},
	})
	if res[0].Err != nil || !errors.Is(res[1].Err, persistence.ErrLeaseLost) {
		e.t.Fatalf("group: %v, %v; want the first written and the second's lease lost", res[0].Err, res[1].Err)
	}
	if d0, d1 := e.seekDoneID("orders/0"), e.seekDoneID("orders/1"); d0 != 1 || d1 != 0 {
		e.t.Errorf("seek_done_id = %d, %d; want 1 (fenced batch) and 0 (stale token)", d0, d1)
	}
}

// A row's seek_requested_at is the time of its newest seek, by the
// store's clock; a pause leaves it. ExpireSeek marks only the row's
// newest pending seek done, once, with one audit entry; a seek's own
// fenced mark after it fails with ErrSeekDone and writes nothing.
func testExpireSeek(e *env) {
	l := e.acquire("orders/0", "node-1")
	e.cp(l, "100", false)
	before := e.now()
	r1 := e.askSeek("orders/0", "5")
	e.wantTime("seek_requested_at", r1.SeekRequestedAt, before)
	e.advance(time.Second)
	e.setControl(pause("orders", "orders/0", true, "hold"))
	var row persistence.Control
	for _, c := range e.listControls() {
		if c.Unit == "orders/0" {
			row = c
		}
	}
	if !row.SeekRequestedAt.Equal(r1.SeekRequestedAt) || !row.PendingSeek() {
		e.t.Errorf("after a pause: seek_requested_at %s (want %s kept), pending %v", row.SeekRequestedAt, r1.SeekRequestedAt, row.PendingSeek())
	}
	e.advance(time.Second)
	r2 := e.askSeek("orders/0", "7") // overtakes seek 1
	if !r2.SeekRequestedAt.After(r1.SeekRequestedAt) && e.clk != nil {
		e.t.Errorf("a second seek's seek_requested_at %s, want after %s", r2.SeekRequestedAt, r1.SeekRequestedAt)
	}
	exp := persistence.SeekExpiry{Source: "orders", Unit: "orders/0", OlderThan: time.Millisecond, Node: "node-3",
		Why: "not carried out within 5m0s", By: "ops", Reason: "rewind"}
	e.waitFor(time.Second, "seek 2 older than 1ms by the store's clock", func() bool { return e.seekAge("orders/0") > exp.OlderThan })
	for _, tt := range []struct {
		id   int64
		unit string
		want bool
	}{
		{1, "orders/0", false}, // overtaken: not the row's newest
		{2, "orders/9", false}, // no row
		{2, "orders/0", true},
		{2, "orders/0", false}, // done already
	} {
		x := exp
		x.ID, x.Unit = tt.id, tt.unit
		got, err := e.s.ExpireSeek(e.ctx, x)
		if err != nil || got != tt.want {
			e.t.Errorf("ExpireSeek(%d of %s) = %v, %v; want %v", tt.id, tt.unit, got, err, tt.want)
		}
	}
	if got := e.seekDoneID("orders/0"); got != 2 {
		e.t.Errorf("seek_done_id after the expiry = %d, want 2", got)
	}
	as := e.audit(persistence.AuditFilter{Unit: "orders/0"})
	n := 0
	for _, a := range as {
		if a.Args == "id=2 expired: not carried out within 5m0s" {
			n++
			if a.Action != "seek" || a.Node != "node-3" || a.By != "ops" || a.Reason != "rewind" || a.Source != "orders" {
				e.t.Errorf("the expiry's audit entry: %+v", a)
			}
		}
	}
	if n != 1 {
		e.t.Errorf("%d audit entries of the expiry, want 1: %+v", n, as)
	}
	// the owner's seek after the expiry: refused, nothing written
	_, err := e.s.Apply(e.ctx, &persistence.Batch{Source: "orders", Unit: "orders/0", Lease: l, Checkpoint: "7", Reset: true, SeekDone: 2})
	if !errors.Is(err, persistence.ErrSeekDone) {
		e.t.Fatalf("a seek after its expiry: %v, want ErrSeekDone", err)
	}
	e.wantCheckpoint("orders/0", "100", false)
	// in a group too: the expired seek's batch alone is refused
	g, ok := e.s.(persistence.GroupApplier)
	if !ok {
		return
	}
	l1 := e.acquire("orders/1", "node-1")
	res := g.ApplyGroup(e.ctx, []*persistence.Batch{
		{Source: "orders", Unit: "orders/0", Lease: l, Checkpoint: "7", Reset: true, SeekDone: 2},
		{Source: "orders", Unit: "orders/1", Lease: l1, Checkpoint: "3"},
	})
	if !errors.Is(res[0].Err, persistence.ErrSeekDone) || res[1].Err != nil {
		e.t.Fatalf("group: %v, %v; want ErrSeekDone and the other written", res[0].Err, res[1].Err)
	}
	e.wantCheckpoint("orders/0", "100", false)
	e.wantCheckpoint("orders/1", "3", false)
}

// seekAge is unit's row's SeekAge as ListControls reads it.
func (e *env) seekAge(unit string) time.Duration {
	e.t.Helper()
	for _, c := range e.listControls() {
		if c.Unit == unit {
			return c.SeekAge
		}
	}
	e.t.Fatalf("no control row of %s", unit)
	return 0
}

// A seek's age is the store's: ListControls reads it by the store's
// clock, and ExpireSeek marks a seek only when it is older than
// OlderThan by that clock, whatever the caller's clock says. A node
// whose clock runs hours ahead of the store's that asks to expire a
// fresh seek expires nothing.
func testExpireSeekByStoreClock(e *env) {
	e.acquire("orders/0", "node-1")
	e.askSeek("orders/0", "5")
	if age := e.seekAge("orders/0"); age < 0 || age > time.Minute {
		e.t.Errorf("a fresh seek's age = %s, want between 0 and 1m by the store's clock", age)
	}
	// the node believes the seek asked hours ago: the store must refuse
	exp := persistence.SeekExpiry{Source: "orders", Unit: "orders/0", ID: 1, OlderThan: time.Hour, Node: "node-ahead",
		Why: "seek 1 asked 3h ago (the node's clock)"}
	if got, err := e.s.ExpireSeek(e.ctx, exp); err != nil || got {
		e.t.Fatalf("ExpireSeek(fresh seek, older than 1h) = %v, %v; want false, nil (the store's clock judges the age)", got, err)
	}
	if got := e.seekDoneID("orders/0"); got != 0 {
		e.t.Fatalf("seek_done_id after refusing the expiry = %d, want 0 (still pending)", got)
	}
	if n := len(e.audit(persistence.AuditFilter{Unit: "orders/0", Source: "orders"})); n != 1 {
		e.t.Errorf("audit entries after a refused expiry = %d, want 1 (the seek's own)", n)
	}
	if e.clk == nil {
		return // the store keeps its own time: an hour will not pass here
	}
	e.advance(2 * time.Hour)
	if age := e.seekAge("orders/0"); age != 2*time.Hour {
		e.t.Errorf("the seek's age 2h later = %s, want 2h0m0s", age)
	}
	if got, err := e.s.ExpireSeek(e.ctx, exp); err != nil || !got {
		e.t.Errorf("ExpireSeek(seek 2h old, older than 1h) = %v, %v; want true, nil", got, err)
	}
}
