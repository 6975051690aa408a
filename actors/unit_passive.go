package actors

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// ---- passivation: an idle unit gives up its actor (architecture §13) ----
//
// A unit that waits for its Waker (unit.go's invariants) and has fetched
// nothing for Tuning.PassivateAfter, with nothing in flight, nothing held
// and no timer but its wait's, hands what it needs to go on to its
// supervisor (passiveUnit) and stops its actor without releasing the
// lease or closing the reader. The supervisor keeps the record, arranges
// the Waker's call itself and renews nothing: the leaser renews the lease
// as before and tells the supervisor when it is lost. The Waker's call
// (also the one the source's safety sweep provokes every WakeSafety by
// arranging the wake anew, when the reader already has something), a
// stop or a lost lease spawns the actor again from the record (resumeKind says what it does first);
// a restart or a stop of the supervisor itself releases the lease and
// closes the reader as a unit's hard stop does. The tree entry stays as
// it was, marked passive.

// passiveUnit is what a supervisor keeps of a passive unit: one per idle
// unit, so its times are stamps and its lease a leaseRef (120 bytes, not
// 280: issue 12 item 5).
type passiveUnit struct {
	lease       leaseRef // the node is its owner
	conn        *brokerConn
	position    string
	checkpoint  string
	started     stamp // of the actor that passivated first (HealthyAfter)
	committedAt stamp
	busyAt      stamp // the last fetch that returned messages
	due         stamp // WakeSafety is up: the sweep checks it

	// the supervisor's, while the unit is passive
	seq    uint64 // of the Wake arrangement; a call for another is dropped
	cancel func() // the Wake arrangement

	justReset      bool
	commitRefused  bool
	healthReported bool
	// resume is what the actor spawned from the record does first.
	resume resumeKind
	// seek is the seek it is activated for (resumeSeek).
	seek *seekUnit
}

// stamp is a time kept in 8 bytes instead of time.Time's 24: its Unix
// nanoseconds, noStamp for the zero time. It drops the monotonic reading
// and the location: only durations between it and the clock's times are
// read from it.
type stamp int64

const noStamp stamp = math.MinInt64

func stampOf(t time.Time) stamp {
	if t.IsZero() {
		return noStamp
	}
	return stamp(t.UnixNano())
}

func (s stamp) time() time.Time {
	if s == noStamp {
		return time.Time{}
	}
	return time.Unix(0, int64(s))
}

type resumeKind int8

const (
	resumeFetch resumeKind = iota + 1 // woken (the safety sweep's check too): fetch at once
	resumeStop                        // a stop: release the lease, stop
	resumeLost                        // the leaser reported the lease lost
	resumeSeek                        // an operator's seek (unit_seek.go)
)

var resumeNames = [...]string{resumeFetch: "fetch", resumeStop: "stop", resumeLost: "lease-lost", resumeSeek: "seek"}

func (k resumeKind) String() string { return resumeNames[k] }

// passiveHandoff is where a passivating unit leaves its record for its
// supervisor (child.handoff): like exit, it must be there before the
// supervisor sees the actor terminated.
type passiveHandoff = atomic.Pointer[passiveUnit]

// armPassivate is called when the unit starts waiting for its Waker: it
// passivates at once when it has fetched nothing for PassivateAfter, or
// arranges to look again then.
func (u *unitActor) armPassivate(ctx actor.Context) {
	if u.node.tuning.NoPassivate || u.handoff == nil {
		return
	}
	d := u.busyAt.Add(u.node.tuning.PassivateAfter).Sub(u.now())
	if d <= 0 || (u.busyAt.Equal(u.started) && u.node.starts.contended()) {
		// idle long enough, or units wait to start and this one has
		// received nothing since its own start: its actor makes room for
		// them (startgate.go); a unit that has had messages waits its
		// PassivateAfter as ever
		u.tryPassivate(ctx)
		return
	}
	u.wake.passivate = u.after(ctx, d, timerPassivate)
}

// onPassivateTimer: PassivateAfter is up.
func (u *unitActor) onPassivateTimer(ctx actor.Context) {
	u.wake.passivate = nil
	if u.wake.cancel != nil {
		u.tryPassivate(ctx)
	}
}

// tryPassivate passivates the unit if nothing keeps it; else it looks
// again after PassivateAfter (a commit to the broker or a side job still
// in flight).
func (u *unitActor) tryPassivate(ctx actor.Context) {
	if !u.passivable() {
		if u.wake.cancel != nil && u.wake.passivate == nil {
			u.wake.passivate = u.after(ctx, u.node.tuning.PassivateAfter, timerPassivate)
		}
		return
	}
	r := &passiveUnit{
		lease: refOf(u.lease), conn: u.conn, position: u.position, checkpoint: u.checkpoint,
		justReset: u.justReset, commitRefused: u.commitRefused.Load(), healthReported: u.healthReported,
		started: stampOf(u.started), committedAt: stampOf(u.committedAt), busyAt: stampOf(u.busyAt),
		due: stampOf(u.wake.since.Add(u.node.tuning.WakeSafety)),
	}
	u.cancelWake()
	u.conn = nil // the supervisor's now: end must not close it
	u.holdsLease = false
	u.handoff.Store(r)
	u.exit.Store(exitPassive)
	u.node.env.trace("passivated", u.id, "")
	u.incarnation.end()
	ctx.Stop(ctx.Self())
}

// passivable: waiting for the Waker with nothing else going on.
func (u *unitActor) passivable() bool {
	return u.wake.cancel != nil && u.phase == phaseRunning && u.holdsLease && u.conn != nil &&
		u.inflight == 0 && u.cancelFetch == nil && u.held == nil &&
		u.ahead.cancel == nil && u.ahead.result == nil && !u.ahead.reopened &&
		u.retryTimer == nil && u.stopTimer == nil && u.extendTimer == nil &&
		u.commitPending == "" && u.failures == 0 && !u.recovering && u.resetCause == nil &&
		!u.waitNoteShown && u.incarnation.idle()
}

// resumeFrom starts an actor spawned from a passive unit's record: it
// holds the lease and the reader again, tells the leaser where it is, and
// does what the supervisor spawned it for.
func (u *unitActor) resumeFrom(ctx actor.Context, r *passiveUnit) {
	u.lease, u.holdsLease, u.conn = r.lease.full(u.node.env.Node), true, r.conn
	u.position, u.checkpoint, u.justReset = r.position, r.checkpoint, r.justReset
	u.commitRefused.Store(r.commitRefused)
	u.healthReported, u.started, u.committedAt, u.busyAt = r.healthReported, r.started.time(), r.committedAt.time(), r.busyAt.time()
	u.recovering = false
	if r.resume != resumeLost {
		ctx.Send(u.node.leaser, &leaseOwner{unit: u.id, token: u.lease.Token, pid: ctx.Self()})
	}
	u.node.env.trace("activated", u.id, r.resume.String())
	u.becomeRunning()
	switch r.resume {
	case resumeFetch:
		u.fetch(ctx)
	case resumeStop:
		u.beginStop(ctx)
	case resumeLost:
		u.leaseLost(ctx, "renew")
	case resumeSeek:
		u.requestSeek(ctx, r.seek)
	}
}

// idle reports whether no job of the incarnation is in flight.
func (i *incarnation) idle() bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.jobs == 0
}
