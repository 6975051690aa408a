package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/drover-dev/drover/actors/clock"
	"github.com/drover-dev/drover/actors/decode"
	"github.com/drover-dev/drover/actors/exec"
	"github.com/drover-dev/drover/actors/quality"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/internal/mutate"
	"github.com/drover-dev/drover/persistence"
)

// unit actor: one per unit this node owns.
//
// Life cycle: starting → (waiting for parents) → acquiring → running →
// (retrying) → stopping → stopped. Invariants:
//   - at most one main-line job is in flight (parents, acquire, open,
//     fetch, apply, ack, nack), so the reader or receiver is used by one
//     job at a time; the only side job that touches a receiver, the
//     deadline extension of the batch in flight, takes the resource's lock
//     like every receiver job;
//   - a batch is applied only while the actor believes it holds the lease,
//     and the store checks the token, so a stale belief cannot commit;
//   - a stream unit's start is resolved once, on its first open, and
//     recorded by a fenced checkpoint write before anything is fetched;
//     later opens start from the checkpoint;
//   - a fetch is applied in batches of at most spec.BatchBytes bytes, one
//     after the other, in order, each with its own checkpoint;
//   - a failed batch is retried as the very same batch (same messages, same
//     idempotency key); a stream unit first reads its checkpoint again (an
//     apply whose outcome is unknown may have committed), a queue unit
//     relies on the dedupe table; queue messages stay invisible meanwhile
//     (deadline extension);
//   - a batch the store refuses for what it holds (persistence.ErrPermanent)
//     is not retried and not counted as a failure: it is split in two,
//     halves applied in order, down to the single records the store refuses
//     alone, which are dead-lettered with the store's message;
//   - a queue message is acked only after the store committed it.
type unitActor struct {
	ne   *nodeEnv
	spec *SourceSpec
	id   string            // "<source>/<partition>"
	gen  uint64            // of its entry in the tree (child.gen)
	part brokers.Partition // for queues ID is the slot
	sup  *actor.PID
	// initial: the unit was one of the source's units at its first
	// discovery (persistence.Sources), so a unit with no checkpoint starts
	// as spec.Start says; other units start at their earliest.
	initial bool
	// staleFinish: its checkpoint says finished, but of an earlier stream
	// of the same name (the supervisor saw it listed without children).
	staleFinish bool
	// exit tells the supervisor why the unit stopped itself (child.exit).
	exit *atomic.Int32

	inc *incarnation // this instance's jobs and timers

	lease      persistence.Lease
	hasLease   bool
	res        *resource // reader or receiver
	position   string    // last applied position (streams; "" before the first)
	checkpoint string    // the stored checkpoint: a position or a start marker
	resetCause error     // the checkpoint is no longer a broker position: the next open resets it
	resetFrom  string    // the checkpoint resetCause is about
	justReset  bool      // the last open reset the checkpoint, nothing read since

	held      *pendingBatch // the batch being applied or retried (queues: until acked or nacked)
	failures  int
	resumeAt  step
	inflight  int  // main-line jobs in flight
	fetching  bool // the job in flight is a fetch
	stopping  bool
	releasing bool
	stopTimer clock.Timer
	retry     clock.Timer
	extendT   clock.Timer

	note            bool // LastError holds a waiting note, not an error
	retrying        bool // in retrying since the last success (or restarted after failing)
	committedAt     time.Time
	commitPending   string      // newest position not yet sent to a Committer
	noCommit        atomic.Bool // the Committer refused for good (none configured): do not call it
	decoder         decode.Config
	started         time.Time
	reportedHealthy bool
}

// incarnation scopes the jobs and timers of one actor instance: results
// that arrive after it ended (stopped or restarted) are dropped.
type incarnation struct {
	ctx    context.Context
	cancel context.CancelFunc
	ended  atomic.Bool
	fetch  context.CancelFunc // cancels the fetch in flight
}

// resource guards a Reader or Receiver: every call on it holds mu, so two
// jobs never use it at once and Close never runs while one does.
type resource struct {
	mu       sync.Mutex
	reader   brokers.Reader
	receiver brokers.Receiver
	closed   bool
}

// use runs f with the resource locked; a closed resource gives ErrClosed.
func (r *resource) use(f func() error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return brokers.ErrClosed
	}
	return f()
}

func (r *resource) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.closed = true
	if r.reader != nil {
		_ = r.reader.Close()
	}
	if r.receiver != nil {
		_ = r.receiver.Close()
	}
}

// messages the unit receives
type (
	// stopUnit asks for a graceful stop: finish the batch in flight,
	// checkpoint, release the lease.
	stopUnit struct{}
	// parentsListed tells a unit which of its parents the stream still
	// lists: one no longer listed (aged past retention) counts as finished.
	parentsListed struct{ parents []string }
	jobDone       struct {
		inc *incarnation
		v   any
	}
	timerFired struct {
		inc  *incarnation
		kind timerKind
	}
)

type timerKind int

const (
	timerRetry timerKind = iota + 1
	timerStopDeadline
	timerParents
	timerAcquire
	timerCommit
	timerExtend
)

// step is where a unit resumes after a failure.
type step int

const (
	stepParents step = iota + 1
	stepAcquire
	stepOpen
	stepFetch
	stepReapply
)

// job results
type (
	parentsResult struct {
		waiting []string
		err     error
	}
	acquireResult struct {
		lease persistence.Lease
		err   error
	}
	openResult struct {
		res        *resource
		checkpoint string // the stored checkpoint after the open
		finished   bool
		resolved   string     // the start resolved and recorded now
		reset      *resetInfo // the checkpoint was reset now
		operator   error      // the checkpoint is invalid and on_position_reset is fail
		err        error
		broker     bool // err came from the broker
	}
	fetchResult struct {
		res brokers.Result
		err error
	}
	applyResult struct {
		batch    *pendingBatch
		applied  persistence.Applied
		err      error
		attempts int
		// already: a retry found the batch committed by the failed attempt.
		already bool
	}
	ackResult struct {
		n   int
		err error
	}
	nackResult struct {
		err  error
		then func(ctx actor.Context)
	}
	releaseResult struct{ err error }
)

// resetInfo describes a checkpoint reset.
type resetInfo struct {
	from, to string
	cause    error
}

// pendingBatch is a fetch on its way into the store: the batches it was
// cut into (batch_bytes, and splits of a batch the store refused), applied
// one after the other in unit order.
type pendingBatch struct {
	msgs []brokers.Message // all fetched (queues ack all of them)
	// batch is the one being applied or retried: the first not committed.
	batch *persistence.Batch
	// rest are the batches after it, in unit order.
	rest []*persistence.Batch
	// byPos finds the message of an op (handlers get messages; a record
	// the store refuses is dead-lettered with its body).
	byPos map[string]brokers.Message
	// late are the positions dead-lettered after decoding (by a handler's
	// Permanent or a refusal of the store): they are dead letters, not
	// rejections.
	late map[string]bool
	// settling is set when the batch is acked or nacked: an extension job
	// that runs after that leaves the receiver alone.
	settling atomic.Bool
	// refusedOnce is the position of the one op the store refused alone
	// once: it is applied alone again before it is dead-lettered.
	refusedOnce string
}

// events the unit sends its supervisor
type unitEvent struct {
	unit string
	kind unitEventKind
	pid  *actor.PID
}

type unitEventKind int

const (
	evHealthy unitEventKind = iota + 1
)

type qualitySample struct{ stats *quality.Stats }

func newUnit(ne *nodeEnv, spec *SourceSpec, p brokers.Partition, initial bool) *unitActor {
	return &unitActor{
		ne: ne, spec: spec, part: p, id: spec.Name + "/" + p.ID, initial: initial,
		decoder: spec.decodeConfig(),
		exit:    new(atomic.Int32),
	}
}

func (u *unitActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		u.sup = ctx.Parent()
		c, cancel := context.WithCancel(u.ne.ctx)
		u.inc = &incarnation{ctx: c, cancel: cancel}
		u.started = u.ne.env.Clock.Now()
		u.status(func(s *UnitStatus) { s.State = StateStarting; s.NextRetryAt = nil })
		u.ne.env.trace("started", u.id, "")
		if len(u.part.Parents) > 0 && !u.spec.isQueue() {
			u.checkParents(ctx)
		} else {
			u.acquire(ctx)
		}
	case *jobDone:
		if m.inc != u.inc {
			return // a result of an earlier incarnation
		}
		u.onJob(ctx, m.v)
	case *timerFired:
		if m.inc != u.inc {
			return
		}
		u.onTimer(ctx, m.kind)
	case *stopUnit:
		u.beginStop(ctx)
	case *parentsListed:
		u.part.Parents = m.parents
	case *leaseLostNote:
		if u.hasLease && m.token == u.lease.Token && !u.releasing {
			u.leaseLost(ctx, "renew")
		}
	case *actor.Restarting:
		u.end(ctx, false)
	case *actor.Stopping:
		u.end(ctx, true)
	}
}

// status updates the unit's entry in the tree; once its supervisor forgot
// it (a restart), nothing.
func (u *unitActor) status(f func(*UnitStatus)) { u.ne.reg.unit(u.spec.Name, u.id, u.gen, f) }

func (u *unitActor) now() time.Time { return u.ne.env.Clock.Now() }

// run hands a main-line job to the executor; its result comes back as a
// jobDone.
func (u *unitActor) run(ctx actor.Context, label string, job func(context.Context) any) context.CancelFunc {
	u.inflight++
	return u.runSide(ctx, label, job)
}

// runSide hands a job that is not main-line (release, extend) to the
// executor.
func (u *unitActor) runSide(ctx actor.Context, label string, job func(context.Context) any) context.CancelFunc {
	self, inc, root := ctx.Self(), u.inc, ctx.ActorSystem().Root
	return u.ne.env.Executor.Go(exec.WithLabel(inc.ctx, label), job, func(v any) {
		if inc.ended.Load() {
			return
		}
		root.Send(self, &jobDone{inc: inc, v: v})
	})
}

func (u *unitActor) after(ctx actor.Context, d time.Duration, kind timerKind) clock.Timer {
	self, inc, root := ctx.Self(), u.inc, ctx.ActorSystem().Root
	return u.ne.env.Clock.AfterFunc(d, func() {
		if inc.ended.Load() {
			return
		}
		root.Send(self, &timerFired{inc: inc, kind: kind})
	})
}

func (u *unitActor) onTimer(ctx actor.Context, k timerKind) {
	switch k {
	case timerRetry:
		u.retry = nil
		u.resume(ctx)
	case timerStopDeadline:
		u.ne.env.trace("stop-timeout", u.id, "")
		u.finishStop(ctx, true)
	case timerParents:
		u.checkParents(ctx)
	case timerAcquire:
		u.acquire(ctx)
	case timerCommit:
		if u.commitPending != "" && !u.noCommit.Load() {
			u.sendCommit(u.commitPending)
		}
	case timerExtend:
		u.extendT = nil
		u.extend(ctx)
	}
}

func (u *unitActor) onJob(ctx actor.Context, v any) {
	switch v.(type) {
	case releaseResult, extendResult:
	default:
		u.inflight--
	}
	switch r := v.(type) {
	case parentsResult:
		u.onParents(ctx, r)
	case acquireResult:
		u.onAcquire(ctx, r)
	case openResult:
		u.onOpen(ctx, r)
	case fetchResult:
		u.onFetch(ctx, r)
	case applyResult:
		u.onApply(ctx, r)
	case ackResult:
		u.onAck(ctx, r)
	case nackResult:
		u.onNack(ctx, r)
	case extendResult:
		u.onExtend(ctx, r)
	case releaseResult:
		u.onRelease(ctx, r)
	}
}

// ---- parents (Kinesis reshards) ----

func (u *unitActor) checkParents(ctx actor.Context) {
	if u.stopping {
		u.finishStop(ctx, false)
		return
	}
	store, src, parents := u.ne.env.Store, u.spec.Name, u.part.Parents
	u.run(ctx, "parents", func(c context.Context) any {
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
		msg := "waiting for parent partitions to finish: " + strings.Join(r.waiting, ", ")
		u.note = true
		now := u.now()
		u.status(func(s *UnitStatus) { s.State = StateStarting; s.setError(msg, now) })
		u.after(ctx, u.ne.tuning.ParentPoll, timerParents)
		return
	}
	u.clearNote()
	u.acquire(ctx)
}

// ---- lease ----

func (u *unitActor) acquire(ctx actor.Context) {
	if u.stopping {
		u.finishStop(ctx, false)
		return
	}
	u.status(func(s *UnitStatus) { s.State = StateAcquiring; s.NextRetryAt = nil })
	req := persistence.AcquireRequest{Unit: u.id, Owner: u.ne.env.Node, TTL: u.spec.LeaseTTL, Live: u.ne.liveNames(),
		Stale: u.ne.tuning.RenewInterval + u.ne.tuning.TakeoverMargin}
	if mutate.On(mutate.TakeoverAtOnce) {
		req.Stale = 0 // the bug of issue 9 item 6
	}
	store := u.ne.env.Store
	u.run(ctx, "acquire", func(c context.Context) any {
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
			if u.stopping {
				u.finishStop(ctx, false)
				return
			}
			msg := r.err.Error()
			u.note = true
			now := u.now()
			u.status(func(s *UnitStatus) { s.setError(msg, now) })
			u.after(ctx, u.ne.tuning.AcquireRetry, timerAcquire)
			return
		}
		u.fail(ctx, fmt.Errorf("acquire lease: %w", r.err), stepAcquire)
		return
	}
	u.lease, u.hasLease = r.lease, true
	u.failures = 0 // a step that succeeded: failures are counted anew
	u.ne.env.trace("acquired", u.id, fmt.Sprintf("token=%d", r.lease.Token))
	u.ne.metrics.LeaseChanged(u.spec.Name, u.id)
	ctx.Send(u.ne.leaser, &leaseHeld{lease: r.lease, ttl: u.spec.LeaseTTL, pid: ctx.Self(), source: u.spec.Name})
	u.clearNote()
	u.status(func(s *UnitStatus) {
		s.LeaseToken = r.lease.Token
		s.LeaseExpiresAt = timePtr(r.lease.ExpiresAt)
	})
	if u.stopping {
		u.finishStop(ctx, false)
		return
	}
	u.open(ctx)
}

// clearNote removes a waiting note (lease held elsewhere, parents not
// finished) from last_error once the wait is over; real errors stay.
func (u *unitActor) clearNote() {
	if u.note {
		u.note = false
		u.status(func(s *UnitStatus) { s.setError("", time.Time{}) })
	}
}

// leaseLost drops everything not applied and stops: placement decides again.
func (u *unitActor) leaseLost(ctx actor.Context, where string) {
	u.ne.env.trace("lease-lost", u.id, fmt.Sprintf("token=%d at=%s", u.lease.Token, where))
	u.dropLease(ctx)
	now := u.now()
	u.status(func(s *UnitStatus) { s.setError("lease lost ("+where+"): another node owns the unit", now) })
	u.exit.Store(exitLeaseLost)
	ctx.Stop(ctx.Self())
}

// ---- open ----

func (u *unitActor) open(ctx actor.Context) {
	u.closeRes()
	u.stopExtend()
	if u.spec.isQueue() {
		q, slot := u.spec.Queue, u.part.ID
		u.run(ctx, "open", func(c context.Context) any {
			rc, err := q.Open(c, slot)
			if err != nil {
				return openResult{err: fmt.Errorf("open %s: %w", slot, err), broker: true}
			}
			return openResult{res: &resource{receiver: rc}}
		})
		return
	}
	o := streamOpen{store: u.ne.env.Store, spec: u.spec, part: u.part.ID, unit: u.id, lease: u.lease,
		initial: u.initial, cause: u.resetCause, causeAt: u.resetFrom, staleFinish: u.staleFinish}
	u.run(ctx, "open", o.run)
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
		pos, err := o.record(c, mode)
		if err != nil {
			r.err, r.broker = err, !isStoreErr(err)
			return r
		}
		r.checkpoint, r.resolved = pos, pos
	}
	if cause == nil {
		start, ok := brokers.ParseStart(r.checkpoint)
		if !ok {
			r.err = fmt.Errorf("checkpoint %q: a start marker this drover does not know", r.checkpoint)
			return r
		}
		rd, err := o.spec.Stream.Open(c, o.part, start)
		if err == nil {
			r.res = &resource{reader: rd}
			return r
		}
		if !positionInvalid(err) {
			r.err, r.broker = fmt.Errorf("open partition %s: %w", o.part, err), true
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
	pos, err := o.record(c, mode)
	if err != nil {
		r.err, r.broker = fmt.Errorf("reset checkpoint %s (%v): %w", r.checkpoint, cause, err), !isStoreErr(err)
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
		r.err, r.broker = fmt.Errorf("open partition %s%s: %w", o.part, when, err), true
		return r
	}
	r.res = &resource{reader: rd}
	return r
}

// record resolves mode to a concrete start and writes it as the unit's
// checkpoint by a fenced write; it returns the recorded position.
func (o streamOpen) record(c context.Context, mode brokers.StartMode) (string, error) {
	st, err := resolveStart(c, o.spec.Stream, o.part, mode)
	if err != nil {
		return "", fmt.Errorf("resolve the %s start of partition %s: %w", mode, o.part, err)
	}
	pos := brokers.StartPosition(st)
	b := &persistence.Batch{Source: o.spec.Name, Unit: o.unit, Lease: o.lease, Checkpoint: pos, Reset: true}
	if _, err := o.store.Apply(c, b); err != nil {
		return "", &storeError{fmt.Errorf("record checkpoint %s: %w", pos, err)}
	}
	return pos, nil
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
		u.ne.env.trace("start-resolved", u.id, r.resolved)
		u.ne.env.logger().Debug("start resolved", "unit", u.id, "start", r.resolved, "initial", u.initial)
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
		if r.broker && !brokers.Retryable(r.err) {
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
	u.res = r.res
	u.status(func(s *UnitStatus) { s.State = StateRunning; s.NextRetryAt = nil })
	u.fetch(ctx)
}

// setCheckpoint records the stored checkpoint and the last applied
// position it stands for.
func (u *unitActor) setCheckpoint(cp string) {
	u.checkpoint, u.position = cp, brokers.Applied(cp)
	u.status(func(s *UnitStatus) { s.Position = cp })
}

// positionReset reports a checkpoint reset loudly: messages between the
// old checkpoint and the new start were lost upstream (retention) or the
// position was reused (a recreated topic).
func (u *unitActor) positionReset(r *resetInfo) {
	msg := fmt.Sprintf("checkpoint reset from %s to %s (on_position_reset: %s): %v", r.from, r.to, u.spec.OnPositionReset, r.cause)
	u.ne.env.logger().Warn("checkpoint is no longer a position of the broker; reset by a fenced write",
		"unit", u.id, "from", r.from, "to", r.to, "on_position_reset", u.spec.OnPositionReset.String(), "error", r.cause)
	u.ne.env.trace("position-reset", u.id, r.from+" -> "+r.to)
	u.ne.metrics.PositionReset(u.spec.Name, u.id)
	now := u.now()
	u.status(func(s *UnitStatus) { s.setError(msg, now) })
}

// needsOperator parks a unit whose checkpoint is invalid under
// on_position_reset: fail. It is not a failure of the unit: it waits in
// retrying, with the reason, and looks again now and then whether the
// checkpoint was moved.
func (u *unitActor) needsOperator(ctx actor.Context, cause error) {
	if u.stopping {
		u.finishStop(ctx, false)
		return
	}
	msg := fmt.Sprintf("checkpoint %s is no longer a position of the broker (%v); on_position_reset is fail: move the checkpoint to go on", u.checkpoint, cause)
	next := u.now().Add(u.ne.tuning.PositionCheck)
	if !u.retrying {
		u.ne.env.logger().Error("unit stopped on an invalid checkpoint (on_position_reset: fail)", "unit", u.id, "checkpoint", u.checkpoint, "error", cause)
	}
	u.retrying = true
	u.ne.env.trace("position-invalid", u.id, u.checkpoint)
	now := u.now()
	u.status(func(s *UnitStatus) {
		s.State = StateRetrying
		s.setError(msg, now)
		s.NextRetryAt = timePtr(next)
	})
	u.resetCause = nil // look at the checkpoint again next time
	u.resumeAt = stepOpen
	u.retry = u.after(ctx, u.ne.tuning.PositionCheck, timerRetry)
}

// ---- fetch, apply, ack ----

func (u *unitActor) fetch(ctx actor.Context) {
	if u.stopping {
		u.finishStop(ctx, false)
		return
	}
	u.fetching = true
	res, spec := u.res, u.spec
	u.inc.fetch = u.run(ctx, "fetch", func(c context.Context) any {
		var r brokers.Result
		err := res.use(func() (err error) {
			if res.reader != nil {
				r, err = res.reader.Fetch(c, spec.BatchSize, spec.MaxWait)
			} else {
				r, err = res.receiver.Receive(c, spec.BatchSize, spec.MaxWait)
			}
			return err
		})
		return fetchResult{res: r, err: err}
	})
}

func (u *unitActor) onFetch(ctx actor.Context, r fetchResult) {
	u.fetching = false
	u.inc.fetch = nil
	if r.err != nil {
		if u.stopping {
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
		err := r.err
		var be *brokers.Error
		if !errors.As(err, &be) { // a broker error names its operation already
			err = fmt.Errorf("fetch: %w", err)
		}
		if !brokers.Retryable(r.err) {
			u.failNow(ctx, err)
			return
		}
		u.fail(ctx, err, stepFetch)
		return
	}
	now := u.now()
	n := int64(len(r.res.Messages))
	u.status(func(s *UnitStatus) {
		s.Received += n
		s.LastPullAt = timePtr(now)
		s.Lag = r.res.Lag
	})
	u.ne.metrics.Received(u.spec.Name, u.id, n, r.res.Lag)
	if !mutate.On(mutate.FailuresSpanSuccess) { // the bug of issue 9 item 8: only an apply counted
		u.succeeded(ctx)
	}
	pb := u.prepare(r.res)
	if pb == nil {
		u.fetch(ctx)
		return
	}
	u.held = pb
	if u.spec.isQueue() && len(pb.msgs) > 0 {
		u.startExtend(ctx)
	}
	u.apply(ctx, pb, 0)
}

// prepare decodes a fetch into batches; nil when there is nothing to
// write. A batch holds at most spec.BatchBytes bytes of ops (a single op
// larger than that is a batch of its own); the fetch's messages are split
// into as many batches as that takes, in order, each a stream batch with
// the checkpoint of its last message, the last one Finished when the fetch
// reached the end.
func (u *unitActor) prepare(res brokers.Result) *pendingBatch {
	queue := u.spec.isQueue()
	pb := &pendingBatch{msgs: res.Messages, byPos: make(map[string]brokers.Message, len(res.Messages)), late: map[string]bool{}}
	newBatch := func() *persistence.Batch {
		return &persistence.Batch{Source: u.spec.Name, Unit: u.id, Lease: u.lease, Table: u.spec.Table, Dedupe: queue}
	}
	b := newBatch()
	batches := []*persistence.Batch{b}
	size := 0
	for _, m := range res.Messages {
		if !queue && u.position != "" && brokers.ComparePositions(m.Position, u.position) <= 0 {
			continue // at or below the checkpoint: a re-read after a crash
		}
		var op persistence.Op
		if u.spec.Handler != nil {
			op = u.decoder.Raw(m)
		} else {
			op = u.decoder.Record(m)
		}
		pb.byPos[m.Position] = m
		n := op.Size()
		if len(b.Ops) > 0 && size+n > u.spec.BatchBytes && !mutate.On(mutate.NoBatchBytes) {
			b, size = newBatch(), 0
			batches = append(batches, b)
		}
		size += n
		b.Ops = append(b.Ops, op)
		if !queue {
			b.Checkpoint = m.Position
		}
	}
	if res.End && !queue {
		b.Finished = true
		if b.Checkpoint == "" {
			b.Checkpoint = u.position
		}
	}
	if len(b.Ops) == 0 && !b.Finished {
		if queue && len(res.Messages) > 0 {
			pb.batch = b // nothing to write, but the messages need acks
			return pb
		}
		return nil
	}
	if u.spec.Handler != nil {
		for _, b := range batches {
			b.Table = ""
			b.Handle = u.handle(b, pb.byPos)
		}
	}
	pb.batch, pb.rest = batches[0], batches[1:]
	return pb
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

func firstLast(ops []persistence.Op) string {
	if len(ops) == 0 {
		return ".."
	}
	return ops[0].Position + ".." + ops[len(ops)-1].Position
}

func (u *unitActor) apply(ctx actor.Context, pb *pendingBatch, attempts int) {
	if len(pb.batch.Ops) == 0 && !pb.batch.Finished {
		// only queue messages with nothing to store: go on to the acks
		u.onApply(ctx, applyResult{batch: pb, attempts: attempts})
		return
	}
	store, b := u.ne.env.Store, pb.batch
	b.Lease = u.lease
	u.run(ctx, "apply", func(c context.Context) any {
		a, err := store.Apply(c, b)
		return applyResult{batch: pb, applied: a, err: err, attempts: attempts}
	})
}

// reapply retries the batch that failed. A stream unit first reads its
// checkpoint: when the failed attempt committed after all, the batch is
// done. A queue unit applies again; the dedupe table refuses what
// committed.
func (u *unitActor) reapply(ctx actor.Context) {
	pb := u.held
	if pb == nil || pb.batch == nil {
		u.fetch(ctx)
		return
	}
	if u.spec.isQueue() {
		u.apply(ctx, pb, 0)
		return
	}
	store, unit, b := u.ne.env.Store, u.id, pb.batch
	b.Lease = u.lease
	u.run(ctx, "apply", func(c context.Context) any {
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

// committed reports whether checkpoint cp shows batch b committed.
func committed(cp persistence.Checkpoint, b *persistence.Batch) bool {
	if b.Finished && !cp.Finished {
		return false
	}
	return b.Checkpoint == "" || brokers.ComparePositions(brokers.Applied(cp.Position), b.Checkpoint) >= 0
}

func (u *unitActor) onApply(ctx actor.Context, r applyResult) {
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
			res, msgs, delay := u.res, pb.msgs, u.spec.NackDelay
			u.stopExtend()
			u.held = nil
			u.ne.env.Executor.Go(exec.WithLabel(u.inc.ctx, "nack"), func(c context.Context) any {
				return res.receiver.Nack(c, msgs, delay)
			}, func(any) {})
			u.fail(ctx, fmt.Errorf("apply: %w", r.err), stepFetch)
			return
		}
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
	var applied, dead, rejected int64
	var sample *quality.Stats
	if r.already {
		u.ne.env.trace("already-applied", u.id, firstLast(b.Ops))
	} else {
		dup := make(map[string]bool, len(r.applied.Duplicates))
		for _, id := range r.applied.Duplicates {
			dup[id] = true
		}
		for _, op := range b.Ops {
			if op.MessageID != "" && dup[op.MessageID] {
				continue
			}
			if sample == nil {
				sample = quality.New(u.spec.schema)
			}
			sample.Observe(op)
			if op.Kind == persistence.OpDeadLetter {
				dead++
			} else {
				applied++
			}
		}
		for _, op := range b.Ops {
			if op.Kind == persistence.OpDeadLetter && !pb.late[op.Position] && !(op.MessageID != "" && dup[op.MessageID]) {
				rejected++
			}
		}
		if len(b.Ops) > 0 {
			u.ne.env.trace("applied", u.id, fmt.Sprintf("token=%d ops=%d dup=%d %s", b.Lease.Token, len(b.Ops), len(dup), firstLast(b.Ops)))
		}
	}
	if b.Checkpoint != "" {
		u.checkpoint, u.position = b.Checkpoint, b.Checkpoint
	} else if len(b.Ops) > 0 && u.spec.isQueue() {
		u.position = b.Ops[len(b.Ops)-1].Position
	}
	pos := u.position
	u.status(func(s *UnitStatus) {
		s.Applied += applied
		s.DeadLettered += dead
		s.Rejected += rejected
		if pos != "" {
			s.Position = pos
		}
	})
	u.ne.metrics.Applied(u.spec.Name, u.id, applied, rejected, dead)
	if sample != nil {
		ctx.Send(u.sup, &qualitySample{stats: sample})
	}
	u.succeeded(ctx)
	if b.Checkpoint != "" && !u.spec.isQueue() {
		u.commitToBroker(ctx, b.Checkpoint)
	}
	if len(pb.rest) > 0 {
		if u.stopping {
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
	u.fetch(ctx)
}

// commitToBroker tells a stream that records positions in the broker
// (brokers.Committer) where the unit is: at most once a second, in the
// background, and the newest position always reaches it (a position held
// back by the pacing is sent when the second is over). A failure is only
// logged: the store's checkpoint is the truth.
func (u *unitActor) commitToBroker(ctx actor.Context, pos string) {
	if _, ok := u.spec.Stream.(brokers.Committer); !ok || u.noCommit.Load() {
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
	part, unit, log, off := u.part.ID, u.id, u.ne.env.logger(), &u.noCommit
	u.ne.env.Executor.Go(exec.WithLabel(u.inc.ctx, "commit"), func(c2 context.Context) any {
		err := c.Committed(c2, part, pos)
		switch {
		case err == nil || c2.Err() != nil:
		case !brokers.Retryable(err):
			// not configured (no commit_to_group) or refused for good: stop
			// asking, once said
			if off.CompareAndSwap(false, true) {
				log.Info("not recording positions in the broker", "unit", unit, "reason", err)
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
			m, ok := pb.byPos[op.Position]
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
		u.ne.env.trace("refused-split", u.id, fmt.Sprintf("%s | %s", firstLast(first.Ops), firstLast(second.Ops)))
		pb.batch, pb.rest = first, append([]*persistence.Batch{second}, pb.rest...)
		return true
	case len(b.Ops) == 1 && b.Ops[0].Kind != persistence.OpDeadLetter:
		m, ok := pb.byPos[b.Ops[0].Position]
		if !ok {
			return false
		}
		if pb.refusedOnce != m.Position && !mutate.On(mutate.RefuseAtOnce) {
			pb.refusedOnce = m.Position
			u.ne.env.trace("refused-once", u.id, m.Position)
			return true
		}
		b.Ops[0] = u.decoder.Dead(m, "refused by the store: "+err.Error())
		pb.late[m.Position] = true
		u.ne.env.trace("refused", u.id, m.Position)
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
	if u.retrying {
		u.retrying = false
		u.ne.env.logger().Info("unit recovered", "unit", u.id)
		u.ne.env.trace("recovered", u.id, "")
		u.status(func(s *UnitStatus) {
			if s.State == StateRetrying {
				s.State = StateRunning
			}
			s.NextRetryAt = nil
		})
	}
	if !u.reportedHealthy && u.now().Sub(u.started) >= u.ne.tuning.HealthyAfter {
		u.reportedHealthy = true
		ctx.Send(u.sup, &unitEvent{unit: u.id, kind: evHealthy, pid: ctx.Self()})
	}
}

func (u *unitActor) ack(ctx actor.Context, msgs []brokers.Message) {
	u.stopExtend()
	if u.held != nil {
		u.held.settling.Store(true)
	}
	res := u.res
	u.run(ctx, "ack", func(c context.Context) any {
		err := res.use(func() error { return res.receiver.Ack(c, msgs) })
		return ackResult{n: len(msgs), err: err}
	})
}

func (u *unitActor) onAck(ctx actor.Context, r ackResult) {
	u.held = nil
	if r.err != nil {
		// Harmless: the messages come back and the dedupe table refuses them.
		msg := fmt.Sprintf("ack: %v", r.err)
		now := u.now()
		u.status(func(s *UnitStatus) { s.setError(msg, now) })
	} else {
		n := int64(r.n)
		u.status(func(s *UnitStatus) { s.Acked += n })
		u.ne.metrics.Acked(u.spec.Name, u.id, n)
	}
	u.fetch(ctx)
}

// nack gives the held batch's messages back (a main-line job: the
// receiver is never used by two jobs at once), then runs then.
func (u *unitActor) nack(ctx actor.Context, then func(actor.Context)) {
	u.stopExtend()
	pb, res, delay := u.held, u.res, u.spec.NackDelay
	u.held = nil
	if pb == nil || res == nil || len(pb.msgs) == 0 {
		then(ctx)
		return
	}
	msgs := pb.msgs
	pb.settling.Store(true)
	u.run(ctx, "nack", func(c context.Context) any {
		err := res.use(func() error { return res.receiver.Nack(c, msgs, delay) })
		return nackResult{err: err, then: then}
	})
}

func (u *unitActor) onNack(ctx actor.Context, r nackResult) {
	if r.err != nil {
		u.ne.env.trace("nack-failed", u.id, r.err.Error())
	}
	r.then(ctx)
}

// ---- keeping queue messages invisible while they are applied ----

type extendResult struct{ err error }

func (u *unitActor) extendEvery() time.Duration {
	return max(u.spec.AckDeadline/3, 10*time.Millisecond)
}

func (u *unitActor) startExtend(ctx actor.Context) {
	if _, ok := u.res.receiver.(brokers.Extender); !ok || mutate.On(mutate.NoExtend) {
		return
	}
	u.stopExtend()
	u.extendT = u.after(ctx, u.extendEvery(), timerExtend)
}

func (u *unitActor) stopExtend() {
	if u.extendT != nil {
		u.extendT.Stop()
		u.extendT = nil
	}
}

// extend pushes the deadline of the held batch's messages to a full
// AckDeadline from now, and schedules the next extension.
func (u *unitActor) extend(ctx actor.Context) {
	pb, res := u.held, u.res
	if pb == nil || res == nil || len(pb.msgs) == 0 {
		return
	}
	ext, ok := res.receiver.(brokers.Extender)
	if !ok {
		return
	}
	msgs, d := pb.msgs, u.spec.AckDeadline
	u.ne.env.trace("extend", u.id, fmt.Sprintf("n=%d", len(msgs)))
	u.runSide(ctx, "extend", func(c context.Context) any {
		// settling is read under the resource's lock, which the ack or
		// nack that sets it takes too: an extension never follows them.
		return extendResult{err: res.use(func() error {
			if pb.settling.Load() {
				return nil // acked or nacked meanwhile
			}
			return ext.Extend(c, msgs, d)
		})}
	})
	u.extendT = u.after(ctx, u.extendEvery(), timerExtend)
}

func (u *unitActor) onExtend(_ actor.Context, r extendResult) {
	if r.err != nil && !errors.Is(r.err, brokers.ErrClosed) {
		u.ne.env.trace("extend-failed", u.id, r.err.Error())
		u.ne.env.logger().Warn("extend the deadline of messages in flight", "unit", u.id, "error", r.err)
	}
}

// ---- failures ----

// fail counts a failure. Below the limit the unit waits (exponential, full
// jitter) and resumes at step; at the limit it fails to its supervisor,
// which restarts it after its own backoff.
func (u *unitActor) fail(ctx actor.Context, err error, at step) {
	u.failures++
	u.note = false
	msg := err.Error()
	u.ne.env.trace("failed", u.id, fmt.Sprintf("n=%d %s", u.failures, msg))
	if u.failures >= u.spec.MaxConsecutiveFailures {
		u.failNow(ctx, err)
		return
	}
	if u.stopping {
		u.stopWithHeld(ctx)
		return
	}
	d := backoff(u.ne.env.Rand, u.failures, u.ne.tuning.RetryBase, u.ne.tuning.RetryCap)
	now := u.now()
	next := now.Add(d)
	u.logRetry(err, d)
	u.retrying = true
	u.status(func(s *UnitStatus) {
		s.State = StateRetrying
		s.setError(msg, now)
		s.NextRetryAt = timePtr(next)
	})
	u.resumeAt = at
	u.retry = u.after(ctx, d, timerRetry)
}

// logRetry writes a WARN line when a unit retries, at most one per
// RetryLogEvery per unit (across its restarts), counting the ones left out.
func (u *unitActor) logRetry(err error, d time.Duration) {
	ok, skipped := u.ne.reg.retryLog(u.id, u.now(), u.ne.tuning.RetryLogEvery)
	if !ok {
		return
	}
	args := []any{"unit", u.id, "failures", u.failures, "retry_in", d.Round(time.Millisecond), "error", err}
	if skipped > 0 {
		args = append(args, "not_logged", skipped)
	}
	u.ne.env.logger().Warn("unit retrying", args...)
}

// logRefused writes a WARN line when the store refuses a record and it is
// dead-lettered, at most one per RetryLogEvery per unit, counting the ones
// left out: a constraint every record of a stream violates would otherwise
// write a line per record. Each refusal is in the dead letter table with
// its reason, and counted in the metrics.
func (u *unitActor) logRefused(position string, err error) {
	ok, skipped := u.ne.reg.retryLog("refused "+u.id, u.now(), u.ne.tuning.RetryLogEvery)
	if !ok {
		return
	}
	args := []any{"unit", u.id, "position", position, "error", err}
	if skipped > 0 {
		args = append(args, "not_logged", skipped)
	}
	u.ne.env.logger().Warn("the store refuses a record: dead-lettered", args...)
}

// failNow fails the unit to its supervisor: at the failure limit, or at
// once for an error that cannot go away by retrying (brokers.Retryable
// false). A queue batch in flight is given back first.
func (u *unitActor) failNow(ctx actor.Context, err error) {
	if u.failures < u.spec.MaxConsecutiveFailures {
		u.failures = u.spec.MaxConsecutiveFailures
		u.ne.env.trace("failed", u.id, fmt.Sprintf("n=%d final %s", u.failures, err))
	}
	msg := err.Error()
	now := u.now()
	u.status(func(s *UnitStatus) { s.setError(msg, now) })
	u.ne.env.trace("fail-to-supervisor", u.id, msg)
	u.ne.env.logger().Error("unit failed; its supervisor restarts it after a backoff", "unit", u.id, "failures", u.failures, "error", err)
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
	u.ne.env.trace("finished", u.id, u.position)
	u.exit.Store(exitFinished)
	u.stopping = true
	u.finishStop(ctx, false)
}

// ---- stopping ----

func (u *unitActor) beginStop(ctx actor.Context) {
	if u.stopping {
		return
	}
	u.stopping = true
	u.ne.env.trace("stopping", u.id, "")
	u.status(func(s *UnitStatus) { s.State = StateStopping; s.NextRetryAt = nil })
	u.stopTimer = u.after(ctx, u.ne.tuning.StopTimeout, timerStopDeadline)
	if u.fetching && u.inc.fetch != nil {
		// a fetch holds nothing yet: cancel it; its result ends the stop
		u.inc.fetch()
	}
	if u.inflight > 0 {
		// the job in flight (an apply finishes its batch) continues the stop
		return
	}
	if u.retry != nil {
		u.retry.Stop()
		u.retry = nil
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
	if u.releasing && !force {
		return
	}
	u.stopExtend()
	if force || !u.hasLease {
		ctx.Stop(ctx.Self())
		return
	}
	u.releasing = true
	u.closeRes()
	store, l := u.ne.env.Store, u.lease
	ctx.Send(u.ne.leaser, &leaseDropped{unit: u.id, token: l.Token})
	u.runSide(ctx, "release", func(c context.Context) any {
		return releaseResult{err: store.Release(c, l)}
	})
}

func (u *unitActor) onRelease(ctx actor.Context, r releaseResult) {
	if r.err == nil {
		u.ne.env.trace("released", u.id, fmt.Sprintf("token=%d", u.lease.Token))
	}
	u.dropLease(ctx)
	ctx.Stop(ctx.Self())
}

// dropLease forgets the lease, in the tree too, at once: a successor may
// acquire it before this actor has finished stopping, and the tree must not
// show two holders.
func (u *unitActor) dropLease(ctx actor.Context) {
	if u.hasLease {
		ctx.Send(u.ne.leaser, &leaseDropped{unit: u.id, token: u.lease.Token})
	}
	u.hasLease = false
	u.status(func(s *UnitStatus) { s.LeaseToken = 0; s.LeaseExpiresAt = nil })
}

// end cancels the incarnation's jobs and timers (stop or restart). On a
// hard stop with the lease still held it releases it in the background so
// the next owner need not wait for expiry.
func (u *unitActor) end(ctx actor.Context, stopping bool) {
	if u.inc == nil || u.inc.ended.Load() {
		return
	}
	u.inc.ended.Store(true)
	u.inc.cancel()
	for _, t := range []clock.Timer{u.retry, u.stopTimer, u.extendT} {
		if t != nil {
			t.Stop()
		}
	}
	u.closeRes()
	held, l, store := u.hasLease, u.lease, u.ne.env.Store
	if held {
		ctx.Send(u.ne.leaser, &leaseDropped{unit: u.id, token: l.Token})
	}
	u.hasLease = false
	if !stopping {
		return // the next incarnation acquires the lease again
	}
	u.status(func(s *UnitStatus) { s.State = StateStopped; s.LeaseToken = 0; s.LeaseExpiresAt = nil })
	if held {
		u.ne.env.Executor.Go(exec.WithLabel(u.ne.ctx, "release"), func(c context.Context) any {
			return store.Release(c, l)
		}, func(any) {})
	}
}

// closeRes closes the reader or receiver in the background: closing is
// broker I/O and never runs on the mailbox. A job still using it is waited
// for (the resource's lock), after its context was cancelled.
func (u *unitActor) closeRes() {
	res := u.res
	if res == nil {
		return
	}
	u.res = nil
	u.ne.env.Executor.Go(exec.WithLabel(u.ne.ctx, "close"), func(context.Context) any {
		res.close()
		return nil
	}, func(any) {})
}
