package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/drover-dev/drover/actors/events"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/internal/mutate"
	"github.com/drover-dev/drover/persistence"
)

// ---- parents (Kinesis reshards) ----

func (u *unitActor) checkParents(ctx actor.Context) {
	if u.phase.stopping() {
		u.finishStop(ctx, false)
		return
	}
	store, src, parents := u.node.env.Store, u.spec.Name, u.part.Parents
	u.runMainJob(ctx, "parents", func(c context.Context) any {
		var waiting []string
		for _, p := range parents {
			cp, err := store.Checkpoint(c, src+"/"+p)
			if errors.Is(err, persistence.ErrNotFound) || (err == nil && !cp.Finished) {
				waiting = append(waiting, p)
			} else if err != nil {
				return parentsResult{err: fmt.Errorf("read checkpoint of parent %s: %w", p, err)}
			}
		}
		return parentsResult{waiting: waiting}
	})
}

func (u *unitActor) onParents(ctx actor.Context, r parentsResult) {
	if r.err != nil {
		u.fail(ctx, r.err, stepParents)
		return
	}
	if len(r.waiting) > 0 {
		if u.phase.stopping() {
			u.finishStop(ctx, false) // nothing is held yet: stop now, not at the next look
			return
		}
		u.releaseStart() // waiting for its parents: no slot meanwhile
		msg := "waiting for parent partitions to finish: " + strings.Join(r.waiting, ", ")
		u.waitNoteShown = true
		now := u.now()
		u.becomeStarting(func(s *treeUnit) { s.setError(msg, now) })
		u.after(ctx, u.node.tuning.ParentPoll, timerParents)
		return
	}
	u.clearWaitNote()
	u.acquire(ctx)
}

// ---- lease ----

func (u *unitActor) acquire(ctx actor.Context) {
	if u.phase.stopping() {
		u.finishStop(ctx, false)
		return
	}
	u.becomeAcquiring()
	req := persistence.AcquireRequest{Unit: u.id, Owner: u.node.env.Node, TTL: u.spec.LeaseTTL, Live: u.node.liveNames(),
		Stale: u.node.tuning.RenewInterval + u.node.tuning.TakeoverMargin}
	if mutate.On(mutate.TakeoverAtOnce) {
		req.Stale = 0 // the bug of issue 9 item 6
	}
	store := u.node.env.Store
	u.runMainJob(ctx, "acquire", func(c context.Context) any {
		l, err := store.Acquire(c, req)
		return acquireResult{lease: l, err: err}
	})
}

func (u *unitActor) onAcquire(ctx actor.Context, r acquireResult) {
	if r.err != nil {
		// Held by a live owner, or its row locked by a transaction (an apply
		// of the holder, or one of a vanished node that the database cuts
		// off after idle_in_transaction_session_timeout): not a failure of
		// this unit, ask again soon.
		if errors.Is(r.err, persistence.ErrLeaseHeld) || errors.Is(r.err, persistence.ErrBusy) {
			if u.phase.stopping() {
				u.finishStop(ctx, false)
				return
			}
			u.releaseStart() // waiting for its holder: no slot meanwhile
			msg := r.err.Error()
			u.waitNoteShown = true
			now := u.now()
			u.status(func(s *treeUnit) { s.setError(msg, now) })
			u.after(ctx, u.node.tuning.AcquireRetry, timerAcquire)
			return
		}
		u.fail(ctx, fmt.Errorf("acquire lease: %w", r.err), stepAcquire)
		return
	}
	u.recordAcquired(r.lease)
	r.lease.PrevOwner, r.lease.PrevToken = "", 0 // said once, in the event
	u.lease, u.holdsLease = r.lease, true
	u.failures = 0 // a step that succeeded: failures are counted anew
	u.node.env.trace("acquired", u.id, fmt.Sprintf("token=%d", r.lease.Token))
	u.node.metrics.LeaseChanged(u.spec.Name, u.id)
	ctx.Send(u.node.leaser, &leaseHeld{lease: r.lease, ttl: u.spec.LeaseTTL, pid: ctx.Self(), source: u.spec.Name})
	u.clearWaitNote()
	u.status(func(s *treeUnit) { s.setLease(r.lease.Token, r.lease.ExpiresAt) })
	if u.phase.stopping() {
		u.finishStop(ctx, false)
		return
	}
	u.open(ctx)
}

// clearWaitNote removes a waiting note (lease held elsewhere, parents not
// finished) from last_error once the wait is over; real errors stay.
func (u *unitActor) clearWaitNote() {
	if u.waitNoteShown {
		u.waitNoteShown = false
		u.status(func(s *treeUnit) { s.setError("", time.Time{}) })
	}
}

// recordAcquired records the acquisition of lease l in the node's event
// log: a takeover when the store says it replaced another holder.
func (u *unitActor) recordAcquired(l persistence.Lease) {
	if mutate.On(mutate.AnonymousTakeover) {
		l.PrevOwner = "" // the bug the events' simulator invariant catches
	}
	e := events.Event{Source: u.spec.Name, Unit: u.id, Kind: events.KindAcquired, Token: l.Token,
		PrevOwner: l.PrevOwner, PrevToken: l.PrevToken}
	if l.PrevOwner != "" && l.PrevOwner != u.node.env.Node {
		e.Kind = events.KindTakeover
		if slices.Contains(u.node.liveNames(), l.PrevOwner) {
			e.Reason = fmt.Sprintf("the lease of %s (token %d) had expired", l.PrevOwner, l.PrevToken)
		} else {
			e.Reason = fmt.Sprintf("%s (token %d) is not in this node's view and stopped renewing", l.PrevOwner, l.PrevToken)
		}
	}
	u.node.env.Events.Record(e)
}

// leaseLost drops everything not applied and stops: placement decides again.
func (u *unitActor) leaseLost(ctx actor.Context, where string) {
	u.node.env.trace("lease-lost", u.id, fmt.Sprintf("token=%d at=%s", u.lease.Token, where))
	u.node.env.Events.Record(events.Event{Source: u.spec.Name, Unit: u.id, Kind: events.KindLeaseLost, Token: u.lease.Token,
		Reason: "found lost at " + where + ": the store no longer has this token (taken over, or expired)"})
	u.dropLease(ctx)
	now := u.now()
	u.status(func(s *treeUnit) { s.setError("lease lost ("+where+"): another node owns the unit", now) })
	u.exit.Store(exitLeaseLost)
	ctx.Stop(ctx.Self())
}

// ---- open ----

func (u *unitActor) open(ctx actor.Context) {
	u.dropAhead()
	u.ahead.reopened = false // the open is that
	u.closeConn()
	u.stopExtend()
	if u.spec.isQueue() {
		q, slot := u.spec.Queue, u.part.ID
		u.runMainJob(ctx, "open", func(c context.Context) any {
			rc, err := q.Open(c, slot)
			if err != nil {
				return openResult{err: fmt.Errorf("open %s: %w", slot, err), brokerErr: true}
			}
			return openResult{conn: &brokerConn{receiver: rc}}
		})
		return
	}
	o := streamOpen{store: u.node.env.Store, spec: u.spec, part: u.part.ID, unit: u.id, lease: u.lease,
		initial: u.initial, cause: u.resetCause, causeAt: u.resetFrom, staleFinish: u.staleFinish}
	u.runMainJob(ctx, "open", o.run)
}

// streamOpen is the open job of a stream unit: read the checkpoint; on a
// first open resolve the start and record it; on a checkpoint that is no
// longer a position of the broker reset it as on_position_reset says; open
// the reader.
type streamOpen struct {
	store   persistence.Store
	spec    *SourceSpec
	part    string
	unit    string
	lease   persistence.Lease
	initial bool
	cause   error // reset at once: a fetch found the checkpoint causeAt invalid
	causeAt string
	// staleFinish: a finished checkpoint is of an earlier stream
	staleFinish bool
}

func (o streamOpen) run(c context.Context) any {
	var r openResult
	cp, err := o.store.Checkpoint(c, o.unit)
	switch {
	case errors.Is(err, persistence.ErrNotFound):
	case err != nil:
		r.err = fmt.Errorf("read checkpoint: %w", err)
		return r
	}
	r.checkpoint = cp.Position
	cause := o.cause
	if cause != nil && cp.Position != o.causeAt {
		// moved since (a reset whose commit was reported failed, an
		// operator): try the stored checkpoint; reset only if it fails too
		cause = nil
	}
	if cp.Finished && o.staleFinish {
		cause = fmt.Errorf("partition %s is listed again without children, its checkpoint %s is finished: %w",
			o.part, cp.Position, brokers.ErrPositionUnknown)
	} else if cp.Finished {
		r.finished = true
		return r
	}
	if cp.Position == "" && mutate.On(mutate.ResolveEveryOpen) {
		// the bug of issue 9 item 1: resolved on every open, not recorded
		return o.openAt(c, r, brokers.Start{Mode: o.spec.Start}, "")
	}
	if cp.Position == "" {
		// The unit's first open: resolve its start once and record it, so
		// that whoever opens it next starts from there.
		mode := brokers.Earliest
		if o.initial || mutate.On(mutate.LatestForNewUnits) {
			mode = o.spec.Start
		}
		pos, id, err := o.record(c, mode)
		if err != nil {
			r.err, r.brokerErr = err, !isStoreErr(err)
			return r
		}
		r.checkpoint, r.resolved, r.streamID = pos, pos, id
	}
	if cause == nil {
		start, ok := brokers.ParseStart(r.checkpoint)
		if !ok {
			r.err = fmt.Errorf("checkpoint %q: a start marker this drover does not know", r.checkpoint)
			return r
		}
		start.StreamID = cp.StreamID
		if r.resolved != "" {
			start.StreamID = r.streamID
		}
		rd, err := o.spec.Stream.Open(c, o.part, start)
		if err == nil {
			r.conn = &brokerConn{reader: rd}
			if r.resolved == "" && cp.StreamID == "" {
				o.recordStreamID(c, r.checkpoint)
			}
			return r
		}
		if !positionInvalid(err) {
			r.err, r.brokerErr = fmt.Errorf("open partition %s: %w", o.part, err), true
			return r
		}
		cause = err
	}
	// The checkpoint is not a position of the broker any more.
	if mutate.On(mutate.KeepInvalidCheckpoint) {
		// the bug of issue 9 item 3: read from the earliest, keep the checkpoint
		return o.openAt(c, r, brokers.Start{Mode: brokers.Earliest}, "")
	}
	if o.spec.OnPositionReset == ResetFail {
		r.operator = cause
		return r
	}
	mode := brokers.Earliest
	if o.spec.OnPositionReset == ResetLatest {
		mode = brokers.Latest
	}
	pos, _, err := o.record(c, mode)
	if err != nil {
		r.err, r.brokerErr = fmt.Errorf("reset checkpoint %s (%v): %w", r.checkpoint, cause, err), !isStoreErr(err)
		return r
	}
	r.reset = &resetInfo{from: r.checkpoint, to: pos, cause: cause}
	r.checkpoint = pos
	start, _ := brokers.ParseStart(pos)
	return o.openAt(c, r, start, " after a reset")
}

// openAt opens the reader at start into r, or records the broker's error.
func (o streamOpen) openAt(c context.Context, r openResult, start brokers.Start, when string) openResult {
	rd, err := o.spec.Stream.Open(c, o.part, start)
	if err != nil {
		r.err, r.brokerErr = fmt.Errorf("open partition %s%s: %w", o.part, when, err), true
		return r
	}
	r.conn = &brokerConn{reader: rd}
	return r
}

// record resolves mode to a concrete start and writes it as the unit's
// checkpoint by a fenced write, with the stream's incarnation
// (brokers.StreamIdentifier) when the broker names one; it returns the
// recorded position and stream id. The id is asked for before the start
// is resolved: a stream recreated between the two calls leaves a start of
// the new stream recorded against the old id, which the next open refuses
// and resets again (never the other way round, a start of the old stream
// taken for the new one).
func (o streamOpen) record(c context.Context, mode brokers.StartMode) (string, string, error) {
	id, err := streamID(c, o.spec.Stream, o.part)
	if err != nil {
		return "", "", fmt.Errorf("identify the stream of partition %s: %w", o.part, err)
	}
	st, err := resolveStart(c, o.spec.Stream, o.part, mode)
	if err != nil {
		return "", "", fmt.Errorf("resolve the %s start of partition %s: %w", mode, o.part, err)
	}
	pos := brokers.StartPosition(st)
	b := &persistence.Batch{Source: o.spec.Name, Unit: o.unit, Lease: o.lease, Checkpoint: pos, Reset: true, StreamID: id}
	if _, err := o.store.Apply(c, b); err != nil {
		return "", "", &storeError{fmt.Errorf("record checkpoint %s: %w", pos, err)}
	}
	return pos, id, nil
}

// streamID is the stream's incarnation (brokers.StreamIdentifier), or ""
// for a stream that names none.
func streamID(c context.Context, s brokers.Stream, part string) (string, error) {
	si, ok := s.(brokers.StreamIdentifier)
	if !ok || mutate.On(mutate.NoStreamID) {
		return "", nil
	}
	return si.StreamID(c, part)
}

// recordStreamID writes the stream's incarnation beside a checkpoint that
// has none (written by a drover before stream ids, or while the broker had
// none), at the position it holds, by a fenced write. From then on a
// recreation of the stream is told from it. It is done once per unit; a
// failure is left for the next open to try again.
func (o streamOpen) recordStreamID(c context.Context, pos string) {
	id, err := streamID(c, o.spec.Stream, o.part)
	if err != nil || id == "" {
		return
	}
	b := &persistence.Batch{Source: o.spec.Name, Unit: o.unit, Lease: o.lease, Checkpoint: pos, Reset: true, StreamID: id}
	_, _ = o.store.Apply(c, b)
}

// storeError marks an error of the store inside a job that also calls the
// broker.
type storeError struct{ err error }

func (e *storeError) Error() string { return e.err.Error() }
func (e *storeError) Unwrap() error { return e.err }

func isStoreErr(err error) bool {
	var se *storeError
	return errors.As(err, &se)
}

// resolveStart asks the stream for a concrete start (brokers.Resolver). A
// stream that cannot resolve one is read from its beginning for Earliest
// and refused for Latest.
func resolveStart(c context.Context, s brokers.Stream, part string, mode brokers.StartMode) (brokers.Start, error) {
	if r, ok := s.(brokers.Resolver); ok {
		return r.Resolve(c, part, mode)
	}
	if mode == brokers.Earliest {
		return brokers.Start{Mode: brokers.Earliest}, nil
	}
	return brokers.Start{}, fmt.Errorf("%T cannot resolve a latest start", s)
}

// positionInvalid: the checkpoint is no longer a position the broker can
// read after (deleted by retention, or unknown to it).
func positionInvalid(err error) bool {
	return errors.Is(err, brokers.ErrPositionGone) || errors.Is(err, brokers.ErrPositionUnknown)
}

func (u *unitActor) onOpen(ctx actor.Context, r openResult) {
	if !u.spec.isQueue() && (r.err == nil || r.checkpoint != "") {
		u.setCheckpoint(r.checkpoint)
	}
	if r.resolved != "" {
		u.node.env.trace("start-resolved", u.id, r.resolved)
		u.node.env.logger().Debug("start resolved", "unit", u.id, "start", r.resolved, "initial", u.initial)
	}
	u.justReset = r.reset != nil
	if r.reset != nil {
		u.positionReset(r.reset)
	}
	if r.err != nil {
		if errors.Is(r.err, persistence.ErrLeaseLost) {
			u.leaseLost(ctx, "open")
			return
		}
		if r.brokerErr && !brokers.Retryable(r.err) {
			u.failNow(ctx, r.err)
			return
		}
		u.fail(ctx, r.err, stepOpen)
		return
	}
	if r.operator != nil {
		u.needsOperator(ctx, r.operator)
		return
	}
	if r.finished {
		u.finished(ctx)
		return
	}
	u.resetCause = nil
	u.staleFinish = false
	if r.reset == nil {
		// a step that succeeded: failures are counted anew (not after a
		// reset, so that a checkpoint invalid again after each reset counts
		// up and fails the unit to its supervisor)
		u.failures = 0
	}
	u.conn = r.conn
	if u.phase.stopping() {
		u.show(u.phase, noRetryAt) // still stopping: the fetch below ends the stop
	} else {
		u.becomeRunning()
	}
	u.fetch(ctx)
	// a seek of the controls table told before the unit could seek (it
	// is told once: unit_seekrow.go)
	u.pickUpSeek(ctx)
}

// setCheckpoint records the stored checkpoint and the last applied
// position it stands for.
func (u *unitActor) setCheckpoint(cp string) {
	u.checkpoint, u.position = cp, brokers.Applied(cp)
	u.status(func(s *treeUnit) { s.position = cp })
}

// positionReset reports a checkpoint reset loudly: messages between the
// old checkpoint and the new start were lost upstream (retention) or the
// position was reused (a recreated topic).
func (u *unitActor) positionReset(r *resetInfo) {
	msg := fmt.Sprintf("checkpoint reset from %s to %s (on_position_reset: %s): %v", r.from, r.to, u.spec.OnPositionReset, r.cause)
	u.node.env.logger().Warn("checkpoint is no longer a position of the broker; reset by a fenced write",
		"unit", u.id, "from", r.from, "to", r.to, "on_position_reset", u.spec.OnPositionReset.String(), "error", r.cause)
	u.node.env.trace("position-reset", u.id, r.from+" -> "+r.to)
	u.node.env.Events.Record(events.Event{Source: u.spec.Name, Unit: u.id, Kind: events.KindPositionReset, Token: u.lease.Token, Reason: msg})
	u.node.metrics.PositionReset(u.spec.Name, u.id)
	now := u.now()
	u.status(func(s *treeUnit) { s.setError(msg, now) })
}

// needsOperator parks a unit whose checkpoint is invalid under
// on_position_reset: fail. It is not a failure of the unit: it waits in
// retrying, with the reason, and looks again now and then whether the
// checkpoint was moved.
func (u *unitActor) needsOperator(ctx actor.Context, cause error) {
	if u.phase.stopping() {
		u.finishStop(ctx, false)
		return
	}
	msg := fmt.Sprintf("checkpoint %s is no longer a position of the broker (%v); on_position_reset is fail: move the checkpoint to go on", u.checkpoint, cause)
	next := u.now().Add(u.node.tuning.PositionCheck)
	if !u.recovering {
		u.node.env.logger().Error("unit stopped on an invalid checkpoint (on_position_reset: fail)", "unit", u.id, "checkpoint", u.checkpoint, "error", cause)
	}
	u.recovering = true
	u.node.env.trace("position-invalid", u.id, u.checkpoint)
	now := u.now()
	u.becomeRetrying(func(s *treeUnit) {
		s.setError(msg, now)
		s.setNextRetry(next)
	})
	u.resetCause = nil // look at the checkpoint again next time
	u.resumeAt = stepOpen
	u.retryTimer = u.after(ctx, u.node.tuning.PositionCheck, timerRetry)
	u.seekIfIdle(ctx) // the operator's way out
}
