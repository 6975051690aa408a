package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/internal/mutate"
	"github.com/drover-dev/drover/persistence"
)

// ---- fetch, apply, ack ----

func (u *unitActor) fetch(ctx actor.Context) {
	if u.phase.stopping() {
		u.finishStop(ctx, false)
		return
	}
	// A seek is carried out paused or not (seek --after past a poison
	// message, then resume); the fetch after it pauses.
	if u.seekPending() {
		u.startSeek(ctx)
		return
	}
	if u.pauseBeforeFetch() {
		return
	}
	// started: a fetch that waits for messages (a long poll) must not
	// hold a start slot (startgate.go)
	u.releaseStart()
	u.cancelFetch = u.runMainJob(ctx, "fetch", u.fetchJob(false, 0))
}

func (u *unitActor) onFetch(ctx actor.Context, r fetchResult) {
	u.cancelFetch = nil
	if u.seekPending() {
		u.startSeek(ctx) // what was fetched lies on the other side of the seek
		return
	}
	if r.err != nil {
		if u.phase.stopping() {
			u.finishStop(ctx, false)
			return
		}
		if !u.spec.isQueue() && positionInvalid(r.err) {
			// reopen: the open resets the checkpoint as configured — at once,
			// unless the checkpoint was just reset and is invalid again
			// before anything was read (then with a backoff, as a failure)
			u.resetCause, u.resetFrom = r.err, u.checkpoint
			if u.justReset {
				u.fail(ctx, fmt.Errorf("fetch after a reset: %w", r.err), stepOpen)
				return
			}
			u.open(ctx)
			return
		}
		err := namedOp("fetch", r.err)
		if !brokers.Retryable(r.err) {
			u.failNow(ctx, err)
			return
		}
		u.fail(ctx, err, stepFetch)
		return
	}
	if r.schemaErr != nil && !mutate.On(mutate.RegistryDeadLetters) {
		u.schemaRetry(ctx, r)
		return
	}
	now := u.now()
	n := int64(len(r.fetched.Messages))
	lag := u.lag.fetched(r.fetched, !u.spec.isQueue())
	u.status(func(s *treeUnit) {
		s.pulled(n, now)
		s.setLag(lag)
	})
	u.node.metrics.Received(u.spec.Name, u.id, n)
	u.node.metrics.Lag(u.spec.Name, u.id, lag)
	if n > 0 {
		u.busyAt = now // PassivateAfter counts from here
	}
	if !mutate.On(mutate.FailuresSpanSuccess) { // the bug of issue 9 item 8: only an apply counted
		u.succeeded(ctx)
	}
	pb := u.tracePrepare(r)
	if pb == nil {
		u.showLag(lag, u.lag.applied()) // nothing to apply: applied
		if len(r.fetched.Messages) == 0 && !r.fetched.End && u.waitWake(ctx) {
			return // idle: no job in flight until the broker calls
		}
		u.fetch(ctx)
		return
	}
	u.held = pb
	if u.spec.isQueue() && len(pb.msgs) > 0 {
		u.startExtend(ctx)
	}
	u.apply(ctx, pb, 0)
	if behind(r.fetched, u.spec.BatchSize) {
		u.startAhead(ctx)
	}
}

// schemaRetry: the schema registry could not be asked for the schemas of
// a fetch. Nothing of it is decoded (nothing is dead-lettered for an
// unreachable registry); the unit retries as after any failed step: a
// stream unit opens its reader again at the checkpoint and reads the same
// messages, a queue unit gives them back (nack) and receives again.
func (u *unitActor) schemaRetry(ctx actor.Context, r fetchResult) {
	err := r.schemaErr
	if u.spec.isQueue() {
		u.held = &pendingBatch{msgs: r.fetched.Messages}
		u.nack(ctx, func(ctx actor.Context) { u.fail(ctx, err, stepFetch) })
		return
	}
	u.dropAhead()
	u.fail(ctx, err, stepOpen)
}

// prepare decodes a fetch into batches (prepareFetch); nil when there is
// nothing to write.
func (u *unitActor) prepare(fetched brokers.Result) *pendingBatch {
	f := fetchBatching{
		source: u.spec.Name, unit: u.id, table: u.spec.Table, lease: u.lease,
		queue: u.spec.isQueue(), position: u.position, maxBytes: u.spec.BatchBytes,
		decoder: u.decoder,
	}
	if u.spec.Handler != nil {
		f.handle = u.handle
	}
	return prepareFetch(f, fetched)
}

// handle adapts the user's Handler to the store's Handle hook.
func (u *unitActor) handle(b *persistence.Batch, msgs map[string]brokers.Message) func(context.Context, persistence.Tx, []persistence.Op) error {
	h, src := u.spec.Handler, u.spec.Name
	return func(c context.Context, tx persistence.Tx, ops []persistence.Op) error {
		hb := Batch{Source: src, Unit: b.Unit, IdempotencyKey: b.IdempotencyKey(), Node: b.Lease.Owner, Token: b.Lease.Token}
		hb.Messages = make([]brokers.Message, 0, len(ops))
		for _, op := range ops {
			hb.Messages = append(hb.Messages, msgs[op.Position])
		}
		return h(c, tx, hb)
	}
}

// split halves a batch the store refused: the first half ends at its last
// op's position (streams: its checkpoint), the second keeps the batch's
// checkpoint and Finished. Each is a batch of its own, with its own
// idempotency key.
func (u *unitActor) split(pb *pendingBatch, b *persistence.Batch) (first, second *persistence.Batch) {
	n := len(b.Ops) / 2
	l, r := *b, *b
	l.Ops, r.Ops = slices.Clone(b.Ops[:n]), slices.Clone(b.Ops[n:])
	l.Finished = false
	if !u.spec.isQueue() {
		l.Checkpoint = l.Ops[n-1].Position
	}
	if b.Handle != nil {
		l.Handle, r.Handle = u.handle(&l, pb.byPos), u.handle(&r, pb.byPos)
	}
	return &l, &r
}

func (u *unitActor) apply(ctx actor.Context, pb *pendingBatch, attempts int) {
	if len(pb.batch.Ops) == 0 && !pb.batch.Finished {
		// only queue messages with nothing to store: go on to the acks
		u.onApply(ctx, applyResult{batch: pb, attempts: attempts})
		return
	}
	b := pb.batch
	b.Lease = u.lease
	u.traceApplyStart(pb)
	u.storeApply(ctx, b, func(a persistence.Applied, err error) any {
		return applyResult{batch: pb, applied: a, err: err, attempts: attempts}
	})
}

// reapply retries the batch that failed. A stream unit first reads its
// checkpoint: when the failed attempt committed after all, the batch is
// done. A queue unit applies again; the dedupe table refuses what
// committed. A stream unit's retry reads and applies in one job of its
// own, not through the node's committer: it is rare, and the read must
// come right before the apply.
func (u *unitActor) reapply(ctx actor.Context) {
	pb := u.held
	if pb == nil || pb.batch == nil {
		u.next(ctx)
		return
	}
	if u.spec.isQueue() {
		u.apply(ctx, pb, 0)
		return
	}
	store, unit, b := u.node.env.Store, u.id, pb.batch
	b.Lease = u.lease
	u.traceApplyStart(pb)
	u.runMainJob(ctx, "apply", func(c context.Context) any {
		cp, err := store.Checkpoint(c, unit)
		switch {
		case errors.Is(err, persistence.ErrNotFound):
		case err != nil:
			return applyResult{batch: pb, err: fmt.Errorf("read checkpoint: %w", err)}
		case committed(cp, b):
			return applyResult{batch: pb, already: true}
		}
		a, err := store.Apply(c, b)
		return applyResult{batch: pb, applied: a, err: err}
	})
}

func (u *unitActor) onApply(ctx actor.Context, r applyResult) {
	u.traceApplied(r)
	pb := r.batch
	if r.err != nil {
		var perm *PermanentError
		switch {
		case errors.Is(r.err, persistence.ErrLeaseLost):
			u.leaseLost(ctx, "apply")
			return
		case errors.As(r.err, &perm) && r.attempts < len(pb.batch.Ops) && u.deadLetter(pb, perm):
			u.apply(ctx, pb, r.attempts+1)
			return
		case persistence.Permanent(r.err) && !mutate.On(mutate.RetryPermanent) && u.refused(pb, r.err):
			// Not a failure of the unit: the store refuses what the batch
			// holds. Split it, or dead-letter its one record, and go on.
			u.apply(ctx, pb, 0)
			return
		}
		if mutate.On(mutate.NackConcurrent) && u.spec.isQueue() {
			// the bug of issue 9 item 10: nack beside the next receive
			conn, msgs, delay := u.conn, pb.msgs, u.spec.NackDelay
			u.stopExtend()
			u.held = nil
			u.incarnation.goJob(u.node.env.Executor, "nack", func(c context.Context) any {
				return conn.receiver.Nack(c, msgs, delay)
			}, func(any) {})
			u.fail(ctx, fmt.Errorf("apply: %w", r.err), stepFetch)
			return
		}
		// The fetch ahead is dropped: the reader is opened again at the
		// checkpoint once this batch committed.
		u.dropAhead()
		if mutate.On(mutate.RefetchFailedBatch) && !u.spec.isQueue() {
			u.held = nil // the bug of issue 9 item 13: fetched again, other bounds
			u.fail(ctx, fmt.Errorf("apply: %w", r.err), stepOpen)
			return
		}
		// Retry this very batch after a backoff (stepReapply).
		u.fail(ctx, fmt.Errorf("apply: %w", r.err), stepReapply)
		return
	}
	b := pb.batch
	var t applyTally
	if r.already {
		u.node.env.trace("already-applied", u.id, opRange(b.Ops))
	} else {
		t = tallyApply(b.Ops, r.applied.Duplicates, pb.late, u.spec.schema)
		if len(b.Ops) > 0 {
			u.node.env.trace("applied", u.id, fmt.Sprintf("token=%d ops=%d dup=%d %s", b.Lease.Token, len(b.Ops), t.duplicates, opRange(b.Ops)))
		}
	}
	applied, dead, rejected, sample := t.applied, t.deadLettered, t.rejected, t.sample
	if b.Checkpoint != "" {
		u.checkpoint, u.position = b.Checkpoint, b.Checkpoint
	} else if len(b.Ops) > 0 && u.spec.isQueue() {
		u.position = b.Ops[len(b.Ops)-1].Position
	}
	pos := u.position
	done := len(pb.rest) == 0 // the whole fetch is applied
	lag := u.lag.applied()
	u.status(func(s *treeUnit) {
		s.appliedBatch(applied, rejected, dead)
		if pos != "" {
			s.position = pos
		}
		if done {
			s.setLag(lag)
		}
	})
	u.node.metrics.Applied(u.spec.Name, u.id, applied, rejected, dead)
	if done {
		u.node.metrics.Lag(u.spec.Name, u.id, lag)
	}
	if sample != nil {
		ctx.Send(u.supervisor, &qualitySample{stats: sample})
	}
	u.succeeded(ctx)
	if b.Checkpoint != "" && !u.spec.isQueue() {
		u.commitToBroker(ctx, b.Checkpoint)
	}
	if len(pb.rest) > 0 {
		if u.phase.stopping() {
			// the rest of the fetch is the next owner's: a stream unit's
			// checkpoint says where it starts, a queue's messages go back
			u.stopWithHeld(ctx)
			return
		}
		// the next batch of the fetch (batch_bytes, or the second half of
		// a refused batch), in order
		pb.batch, pb.rest = pb.rest[0], pb.rest[1:]
		u.apply(ctx, pb, 0)
		return
	}
	if b.Finished {
		u.held = nil
		u.finished(ctx)
		return
	}
	if u.spec.isQueue() && len(pb.msgs) > 0 {
		u.ack(ctx, pb.msgs)
		return
	}
	u.held = nil
	u.next(ctx)
}

// commitToBroker tells a stream that records positions in the broker
// (brokers.Committer) where the unit is: at most once a second, in the
// background, and the newest position always reaches it (a position held
// back by the pacing is sent when the second is over). A failure is only
// logged: the store's checkpoint is the truth.
func (u *unitActor) commitToBroker(ctx actor.Context, pos string) {
	if _, ok := u.spec.Stream.(brokers.Committer); !ok || u.commitRefused.Load() {
		return
	}
	now := u.now()
	if wait := u.committedAt.Add(time.Second).Sub(now); wait > 0 {
		if u.commitPending == "" {
			u.after(ctx, wait, timerCommit)
		}
		u.commitPending = pos
		return
	}
	u.sendCommit(pos)
}

func (u *unitActor) sendCommit(pos string) {
	c := u.spec.Stream.(brokers.Committer)
	u.committedAt, u.commitPending = u.now(), ""
	part, unit, log, off := u.part.ID, u.id, u.node.env.logger(), &u.commitRefused
	u.incarnation.goJob(u.node.env.Executor, "commit", func(c2 context.Context) any {
		err := c.Committed(c2, part, pos)
		switch {
		case err == nil || c2.Err() != nil:
		case !brokers.Retryable(err):
			// refused for good (a stream without a group is no Committer:
			// cluster/node hands it over without): stop asking while the
			// unit runs, and say so loudly once
			if off.CompareAndSwap(false, true) {
				log.Warn("the broker refuses to record positions: not asking again until the unit restarts", "unit", unit, "error", err)
			}
		default:
			log.Warn("record position in the broker", "unit", unit, "position", pos, "error", err)
		}
		return nil
	}, func(any) {})
}

// deadLetter turns the op a handler refused into a dead letter; false when
// the error names no op of the batch. The message key is kept in its
// dead-letter form (decode.MsgKey), as records mode keeps it, so that a
// binary key survives and replays as itself, and the payload is cut at
// dead_letter_max_bytes like every dead letter's.
func (u *unitActor) deadLetter(pb *pendingBatch, perm *PermanentError) bool {
	for i, op := range pb.batch.Ops {
		if op.Position == perm.Position && op.Kind == persistence.OpMessage {
			m, ok := pb.message(op.Position)
			if !ok {
				return false
			}
			pb.batch.Ops[i] = u.decoder.Dead(m, "handler: "+perm.Err.Error())
			pb.late[op.Position] = true
			return true
		}
	}
	return false
}

// refused handles a batch the store refused for what it holds
// (persistence.ErrPermanent): a batch of several ops is split in two, the
// halves applied in order; a batch of one op that is not a dead letter yet
// is applied alone once more, and refused again, dead-letters it with the
// store's message, the body cut as every dead letter's. The rest of the
// fetch then applies as usual. False when there is nothing to split or
// dead-letter (the store refuses a dead letter, or a batch with no ops):
// the error is then counted as a failure like any other.
//
// The second try is there because an error of a permanent class can come
// of a race that is over once it is reported: concurrent transactions
// that each run CREATE TABLE IF NOT EXISTS on PostgreSQL, for one, fail
// all but the first with a unique violation (23505) on the catalog. A
// record the store really refuses is refused the second time too.
func (u *unitActor) refused(pb *pendingBatch, err error) bool {
	b := pb.batch
	switch {
	case len(b.Ops) > 1:
		first, second := u.split(pb, b)
		u.node.env.trace("refused-split", u.id, fmt.Sprintf("%s | %s", opRange(first.Ops), opRange(second.Ops)))
		pb.batch, pb.rest = first, append([]*persistence.Batch{second}, pb.rest...)
		return true
	case len(b.Ops) == 1 && b.Ops[0].Kind != persistence.OpDeadLetter:
		m, ok := pb.message(b.Ops[0].Position)
		if !ok {
			return false
		}
		if pb.refusedOnce != m.Position && !mutate.On(mutate.RefuseAtOnce) {
			pb.refusedOnce = m.Position
			u.node.env.trace("refused-once", u.id, m.Position)
			return true
		}
		b.Ops[0] = u.decoder.Dead(m, "refused by the store: "+err.Error())
		pb.late[m.Position] = true
		u.node.env.trace("refused", u.id, m.Position)
		u.logRefused(m.Position, err)
		return true
	}
	return false
}

// succeeded records a successful fetch or apply: the failure count starts
// again, a retrying unit is running again (logged once), and once the unit
// has run long enough its supervisor resets its restart backoff.
func (u *unitActor) succeeded(ctx actor.Context) {
	u.failures = 0
	u.justReset = false
	if u.recovering {
		u.recovering = false
		u.node.env.logger().Info("unit recovered", "unit", u.id)
		u.node.env.trace("recovered", u.id, "")
		if u.phase == phaseRetrying {
			u.becomeRunning()
		} else {
			u.status(noRetryAt)
		}
	}
	if !u.healthReported && u.now().Sub(u.started) >= u.node.tuning.HealthyAfter {
		u.healthReported = true
		ctx.Send(u.supervisor, &unitEvent{unit: u.id, kind: evHealthy, pid: ctx.Self()})
	}
}

func (u *unitActor) ack(ctx actor.Context, msgs []brokers.Message) {
	u.stopExtend()
	if u.held != nil {
		u.held.settling.Store(true)
	}
	conn := u.conn
	u.runMainJob(ctx, "ack", func(c context.Context) any {
		err := conn.use(func() error { return conn.receiver.Ack(c, msgs) })
		return ackResult{n: len(msgs), err: err}
	})
}

func (u *unitActor) onAck(ctx actor.Context, r ackResult) {
	u.held = nil
	if r.err != nil {
		// Harmless: the messages come back and the dedupe table refuses them.
		msg := namedOp("ack", r.err).Error()
		now := u.now()
		u.status(func(s *treeUnit) { s.setError(msg, now) })
	} else {
		n := int64(r.n)
		u.status(func(s *treeUnit) { s.acked += n })
		u.node.metrics.Acked(u.spec.Name, u.id, n)
	}
	u.fetch(ctx)
}

// nack gives the held batch's messages back (a main-line job: the
// receiver is never used by two jobs at once), then runs then.
func (u *unitActor) nack(ctx actor.Context, then func(actor.Context)) {
	u.stopExtend()
	pb, conn, delay := u.held, u.conn, u.spec.NackDelay
	u.held = nil
	if pb == nil || conn == nil || len(pb.msgs) == 0 {
		then(ctx)
		return
	}
	msgs := pb.msgs
	pb.settling.Store(true)
	u.runMainJob(ctx, "nack", func(c context.Context) any {
		err := conn.use(func() error { return conn.receiver.Nack(c, msgs, delay) })
		return nackResult{err: err, then: then}
	})
}

func (u *unitActor) onNack(ctx actor.Context, r nackResult) {
	if r.err != nil {
		u.node.env.trace("nack-failed", u.id, r.err.Error())
	}
	r.then(ctx)
}
