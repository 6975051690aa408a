package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/internal/mutate"
)

// ---- keeping queue messages invisible while they are applied ----

type extendResult struct{ err error }

func (u *unitActor) extendEvery() time.Duration {
	return max(u.spec.AckDeadline/3, 10*time.Millisecond)
}

func (u *unitActor) startExtend(ctx actor.Context) {
	if _, ok := u.conn.receiver.(brokers.Extender); !ok || mutate.On(mutate.NoExtend) {
		return
	}
	u.stopExtend()
	u.extendTimer = u.after(ctx, u.extendEvery(), timerExtend)
}

func (u *unitActor) stopExtend() {
	if u.extendTimer != nil {
		u.extendTimer.Stop()
		u.extendTimer = nil
	}
}

// extend pushes the deadline of the held batch's messages to a full
// AckDeadline from now, and schedules the next extension.
func (u *unitActor) extend(ctx actor.Context) {
	pb, conn := u.held, u.conn
	if pb == nil || conn == nil || len(pb.msgs) == 0 {
		return
	}
	ext, ok := conn.receiver.(brokers.Extender)
	if !ok {
		return
	}
	msgs, d := pb.msgs, u.spec.AckDeadline
	u.node.env.trace("extend", u.id, fmt.Sprintf("n=%d", len(msgs)))
	u.runSideJob(ctx, "extend", func(c context.Context) any {
		// settling is read under the connection's lock, which the ack or
		// nack that sets it takes too: an extension never follows them.
		return extendResult{err: conn.use(func() error {
			if pb.settling.Load() {
				return nil // acked or nacked meanwhile
			}
			return ext.Extend(c, msgs, d)
		})}
	})
	u.extendTimer = u.after(ctx, u.extendEvery(), timerExtend)
}

func (u *unitActor) onExtend(_ actor.Context, r extendResult) {
	if r.err != nil && !errors.Is(r.err, brokers.ErrClosed) {
		u.node.env.trace("extend-failed", u.id, r.err.Error())
		u.node.env.logger().Warn("extend the deadline of messages in flight", "unit", u.id, "error", r.err)
	}
}

// ---- failures ----

// fail counts a failure. Below the limit the unit waits (exponential, full
// jitter) and resumes at step; at the limit it fails to its supervisor,
// which restarts it after its own backoff.
func (u *unitActor) fail(ctx actor.Context, err error, at step) {
	u.failures++
	u.waitNoteShown = false
	msg := err.Error()
	u.node.env.trace("failed", u.id, fmt.Sprintf("n=%d %s", u.failures, msg))
	if u.failures >= u.spec.MaxConsecutiveFailures {
		u.failNow(ctx, err)
		return
	}
	if u.phase.stopping() {
		u.stopWithHeld(ctx)
		return
	}
	d := backoff(u.node.env.Rand, u.failures, u.node.tuning.RetryBase, u.node.tuning.RetryCap)
	now := u.now()
	next := now.Add(d)
	u.logRetry(err, d)
	u.recovering = true
	u.becomeRetrying(func(s *treeUnit) {
		s.setError(msg, now)
		s.setNextRetry(next)
	})
	u.resumeAt = at
	u.retryTimer = u.after(ctx, d, timerRetry)
	u.seekIfIdle(ctx) // a seek waiting for the failed step goes first
}

// logRetry writes a WARN line when a unit retries, at most one per
// RetryLogEvery per unit (across its restarts), counting the ones left out.
func (u *unitActor) logRetry(err error, d time.Duration) {
	ok, skipped := u.node.reg.retryLog(u.id, u.now(), u.node.tuning.RetryLogEvery)
	if !ok {
		return
	}
	args := []any{"unit", u.id, "failures", u.failures, "retry_in", d.Round(time.Millisecond), "error", err}
	if skipped > 0 {
		args = append(args, "not_logged", skipped)
	}
	u.node.env.logger().Warn("unit retrying", args...)
}

// logRefused writes a WARN line when the store refuses a record and it is
// dead-lettered, at most one per RetryLogEvery per unit, counting the ones
// left out: a constraint every record of a stream violates would otherwise
// write a line per record. Each refusal is in the dead letter table with
// its reason, and counted in the metrics.
func (u *unitActor) logRefused(position string, err error) {
	ok, skipped := u.node.reg.retryLog("refused "+u.id, u.now(), u.node.tuning.RetryLogEvery)
	if !ok {
		return
	}
	args := []any{"unit", u.id, "position", position, "error", err}
	if skipped > 0 {
		args = append(args, "not_logged", skipped)
	}
	u.node.env.logger().Warn("the store refuses a record: dead-lettered", args...)
}

// failNow fails the unit to its supervisor: at the failure limit, or at
// once for an error that cannot go away by retrying (brokers.Retryable
// false). A queue batch in flight is given back first.
func (u *unitActor) failNow(ctx actor.Context, err error) {
	if u.failures < u.spec.MaxConsecutiveFailures {
		u.failures = u.spec.MaxConsecutiveFailures
		u.node.env.trace("failed", u.id, fmt.Sprintf("n=%d final %s", u.failures, err))
	}
	msg := err.Error()
	now := u.now()
	u.status(func(s *treeUnit) { s.setError(msg, now) })
	u.node.env.trace("fail-to-supervisor", u.id, msg)
	u.node.env.logger().Error("unit failed; its supervisor restarts it after a backoff", "unit", u.id, "failures", u.failures, "error", err)
	if u.held != nil && u.spec.isQueue() {
		u.nack(ctx, func(actor.Context) { panic(&unitFailure{unit: u.id, err: err}) })
		return
	}
	panic(&unitFailure{unit: u.id, err: err})
}

// unitFailure is the panic value a unit fails to its supervisor with.
type unitFailure struct {
	unit string
	err  error
}

func (f *unitFailure) Error() string { return f.err.Error() }

func (u *unitActor) resume(ctx actor.Context) {
	switch u.resumeAt {
	case stepParents:
		u.checkParents(ctx)
	case stepAcquire:
		u.acquire(ctx)
	case stepOpen:
		u.open(ctx)
	case stepReapply:
		u.reapply(ctx)
	default:
		u.fetch(ctx)
	}
}

// finished: the unit was read to its end and that is recorded; release the
// lease and stop for good (its children can start).
func (u *unitActor) finished(ctx actor.Context) {
	u.node.env.trace("finished", u.id, u.position)
	u.exit.Store(exitFinished)
	u.finishStop(ctx, false) // releasing, then stopped
}
