package actors

import (
	"context"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/drover-dev/drover/actors/events"
	"github.com/drover-dev/drover/internal/clock"
	"github.com/drover-dev/drover/internal/exec"
)

// ---- stopping ----

func (u *unitActor) beginStop(ctx actor.Context) {
	if u.phase.stopping() {
		return
	}
	u.node.env.trace("stopping", u.id, "")
	if u.seekPending() {
		u.endSeek() // not started: the next owner is asked
	}
	u.becomeStopping()
	u.stopTimer = u.after(ctx, u.node.tuning.StopTimeout, timerStopDeadline)
	if u.cancelFetch != nil {
		// a fetch holds nothing yet: cancel it; its result ends the stop
		u.cancelFetch()
	}
	u.dropAhead()  // beside an apply: the next owner's, after the checkpoint
	u.cancelWake() // idle: nothing in flight, the stop ends below
	if u.inflight > 0 {
		// the job in flight (an apply finishes its batch) continues the stop
		return
	}
	if u.retryTimer != nil {
		u.retryTimer.Stop()
		u.retryTimer = nil
	}
	u.stopWithHeld(ctx)
}

// stopWithHeld ends a stop: a queue batch that failed and waits for its
// retry is given back first, so the next owner need not wait for its
// deadline; a stream batch is simply dropped (the checkpoint says where
// the next owner starts).
func (u *unitActor) stopWithHeld(ctx actor.Context) {
	if u.held != nil && u.spec.isQueue() {
		u.nack(ctx, func(ctx actor.Context) { u.finishStop(ctx, false) })
		return
	}
	u.held = nil
	u.finishStop(ctx, false)
}

// finishStop releases the lease (unless forced) and stops the actor.
func (u *unitActor) finishStop(ctx actor.Context, force bool) {
	if u.phase == phaseReleasing && !force {
		return
	}
	u.stopExtend()
	u.dropAhead()
	u.cancelWake()
	if force || !u.holdsLease {
		ctx.Stop(ctx.Self()) // stopped (end)
		return
	}
	u.becomeReleasing()
	u.closeConn()
	store, l := u.node.env.Store, u.lease
	ctx.Send(u.node.leaser, &leaseDropped{unit: u.id, token: l.Token})
	u.runSideJob(ctx, "release", func(c context.Context) any {
		return releaseResult{err: store.Release(c, l)}
	})
}

func (u *unitActor) onRelease(ctx actor.Context, r releaseResult) {
	if r.err == nil {
		u.node.env.trace("released", u.id, fmt.Sprintf("token=%d", u.lease.Token))
		u.node.env.Events.Record(events.Event{Source: u.spec.Name, Unit: u.id, Kind: events.KindReleased, Token: u.lease.Token})
	}
	u.dropLease(ctx)
	ctx.Stop(ctx.Self())
}

// dropLease forgets the lease, in the tree too, at once: a successor may
// acquire it before this actor has finished stopping, and the tree must not
// show two holders.
func (u *unitActor) dropLease(ctx actor.Context) {
	if u.holdsLease {
		ctx.Send(u.node.leaser, &leaseDropped{unit: u.id, token: u.lease.Token})
	}
	u.holdsLease = false
	u.status(func(s *treeUnit) { s.dropLease() })
}

// end cancels the incarnation's jobs and timers (stop or restart). On a
// hard stop with the lease still held it releases it in the background so
// the next owner need not wait for expiry.
func (u *unitActor) end(ctx actor.Context, stopped bool) {
	if u.incarnation == nil || u.incarnation.ended.Load() {
		return
	}
	u.incarnation.end()
	u.releaseStart()
	u.endSeek()
	u.cancelWake()
	for _, t := range []clock.Timer{u.retryTimer, u.stopTimer, u.extendTimer} {
		if t != nil {
			t.Stop()
		}
	}
	u.closeConn()
	held, l, store := u.holdsLease, u.lease, u.node.env.Store
	if held {
		ctx.Send(u.node.leaser, &leaseDropped{unit: u.id, token: l.Token})
	}
	u.holdsLease = false
	if !stopped {
		// The next incarnation acquires the lease again; until it has, the
		// tree shows no lease: the leaser no longer renews this one, and
		// another node may take it meanwhile.
		u.status(func(s *treeUnit) { s.dropLease() })
		return
	}
	u.becomeStopped(func(s *treeUnit) { s.dropLease() })
	if held {
		u.node.env.Executor.Go(exec.WithLabel(u.node.ctx, "release"), func(c context.Context) any {
			return store.Release(c, l)
		}, func(any) {})
	}
}

// closeConn closes the reader or receiver in the background: closing is
// broker I/O and never runs on the mailbox. A job still using it is waited
// for (the connection's lock), after its context was cancelled.
func (u *unitActor) closeConn() {
	u.cancelWake()
	conn := u.conn
	if conn == nil {
		return
	}
	u.conn = nil
	u.node.env.Executor.Go(exec.WithLabel(u.node.ctx, "close"), func(context.Context) any {
		conn.close()
		return nil
	}, func(any) {})
}
