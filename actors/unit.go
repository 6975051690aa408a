package actors

import (
	"context"
	"errors"
	"fmt"
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
	"github.com/drover-dev/drover/persistence"
)

// unit actor: one per unit this node owns.
//
// Life cycle: starting → (waiting for parents) → acquiring → running →
// (retrying) → stopping → stopped. Invariants:
//   - at most one job that touches the reader or receiver is in flight
//     (open, fetch, apply+ack are sequential), so a Reader is never used by
//     two goroutines at once;
//   - a batch is applied only while the actor believes it holds the lease,
//     and the store checks the token, so a stale belief cannot commit;
//   - a queue message is acked only after the store committed it;
//   - after any failure the unit reads its position again from the store
//     before fetching (an apply whose outcome is unknown may have committed).
type unitActor struct {
	ne   *nodeEnv
	spec *SourceSpec
	id   string            // "<source>/<partition>"
	part brokers.Partition // for queues ID is the slot
	sup  *actor.PID

	inc *incarnation // this instance's jobs and timers

	lease        persistence.Lease
	hasLease     bool
	res          *resource // reader or receiver
	position     string    // last applied position (streams: the checkpoint)
	fromEarliest bool      // the checkpoint's position is gone from the broker

	failures  int
	resumeAt  step
	inflight  int  // main-line jobs in flight: parents, acquire, open, fetch, apply, ack
	fetching  bool // the job in flight is a fetch
	renewing  bool
	stopping  bool
	releasing bool
	stopTimer clock.Timer
	retry     clock.Timer
	renewT    clock.Timer

	note            bool // LastError holds a waiting note, not an error
	committedAt     time.Time
	commitPending   string // newest position not yet sent to a Committer
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

// resource guards a Reader or Receiver so that Close never runs while a
// Fetch is using it.
type resource struct {
	mu       sync.Mutex
	reader   brokers.Reader
	receiver brokers.Receiver
	closed   bool
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
	jobDone  struct {
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
	timerRenew
	timerStopDeadline
	timerParents
	timerAcquire
	timerCommit
)

// step is where a unit resumes after a failure.
type step int

const (
	stepParents step = iota + 1
	stepAcquire
	stepOpen
	stepFetch
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
		checkpoint persistence.Checkpoint
		err        error
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
	}
	ackResult struct {
		n   int
		err error
	}
	renewResult struct {
		lease persistence.Lease
		err   error
	}
	releaseResult struct{ err error }
)

// pendingBatch is a fetched batch on its way into the store.
type pendingBatch struct {
	msgs     []brokers.Message // all fetched (queues ack all of them)
	batch    *persistence.Batch
	rejected int // dead letters made by decoding
}

// events the unit sends its supervisor
type unitEvent struct {
	unit string
	kind unitEventKind
	pid  *actor.PID
}

type unitEventKind int

const (
	evLeaseLost unitEventKind = iota + 1
	evFinished
	evHealthy
)

type qualitySample struct{ stats *quality.Stats }

func newUnit(ne *nodeEnv, spec *SourceSpec, p brokers.Partition) *unitActor {
	return &unitActor{
		ne: ne, spec: spec, part: p, id: spec.Name + "/" + p.ID,
		decoder: decode.Config{KeyField: spec.KeyField, MaxBytes: spec.MaxMessageBytes},
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
	case *actor.Restarting:
		u.end(ctx, false)
	case *actor.Stopping:
		u.end(ctx, true)
	}
}

func (u *unitActor) status(f func(*UnitStatus)) { u.ne.reg.unit(u.spec.Name, u.id, f) }

// run hands a job to the executor; its result comes back as a jobDone.
// Main-line jobs (all but renew and release) are counted in inflight.
func (u *unitActor) run(ctx actor.Context, label string, job func(context.Context) any) context.CancelFunc {
	u.inflight++
	return u.runSide(ctx, label, job)
}

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
	case timerRenew:
		u.renewT = nil
		u.renew(ctx)
	case timerStopDeadline:
		u.ne.env.trace("stop-timeout", u.id, "")
		u.finishStop(ctx, true)
	case timerParents:
		u.checkParents(ctx)
	case timerAcquire:
		u.acquire(ctx)
	case timerCommit:
		if u.commitPending != "" {
			u.sendCommit(u.commitPending)
		}
	}
}

func (u *unitActor) onJob(ctx actor.Context, v any) {
	switch v.(type) {
	case renewResult, releaseResult:
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
	case renewResult:
		u.onRenew(ctx, r)
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
		u.status(func(s *UnitStatus) { s.State = StateStarting; s.LastError = msg })
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
	req := persistence.AcquireRequest{Unit: u.id, Owner: u.ne.env.Node, TTL: u.spec.LeaseTTL, Live: u.ne.liveNames()}
	store := u.ne.env.Store
	u.run(ctx, "acquire", func(c context.Context) any {
		l, err := store.Acquire(c, req)
		return acquireResult{lease: l, err: err}
	})
}

func (u *unitActor) onAcquire(ctx actor.Context, r acquireResult) {
	if r.err != nil {
		if errors.Is(r.err, persistence.ErrLeaseHeld) {
			if u.stopping {
				u.finishStop(ctx, false)
				return
			}
			msg := r.err.Error()
			u.note = true
			u.status(func(s *UnitStatus) { s.LastError = msg })
			u.after(ctx, u.ne.tuning.AcquireRetry, timerAcquire)
			return
		}
		u.fail(ctx, fmt.Errorf("acquire lease: %w", r.err), stepAcquire)
		return
	}
	u.lease, u.hasLease = r.lease, true
	u.ne.env.trace("acquired", u.id, fmt.Sprintf("token=%d", r.lease.Token))
	u.ne.metrics.LeaseChanged(u.spec.Name, u.id)
	u.clearNote()
	u.status(func(s *UnitStatus) {
		s.LeaseToken = r.lease.Token
		s.LeaseExpiresAt = timePtr(r.lease.ExpiresAt)
	})
	u.scheduleRenew(ctx, u.spec.LeaseTTL/3)
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
		u.status(func(s *UnitStatus) { s.LastError = "" })
	}
}

func (u *unitActor) scheduleRenew(ctx actor.Context, d time.Duration) {
	if u.renewT != nil {
		u.renewT.Stop()
	}
	u.renewT = u.after(ctx, d, timerRenew)
}

func (u *unitActor) renew(ctx actor.Context) {
	if !u.hasLease || u.renewing {
		return
	}
	u.renewing = true
	store, l, ttl := u.ne.env.Store, u.lease, u.spec.LeaseTTL
	u.runSide(ctx, "renew", func(c context.Context) any {
		nl, err := store.Renew(c, l, ttl)
		return renewResult{lease: nl, err: err}
	})
}

func (u *unitActor) onRenew(ctx actor.Context, r renewResult) {
	u.renewing = false
	if !u.hasLease {
		return
	}
	if errors.Is(r.err, persistence.ErrLeaseLost) {
		u.leaseLost(ctx, "renew")
		return
	}
	if r.err != nil {
		// Not counted as a failure: the apply path counts store trouble,
		// and fencing keeps an expired lease safe. Try again soon.
		msg := fmt.Sprintf("renew lease: %v", r.err)
		u.status(func(s *UnitStatus) { s.LastError = msg })
		u.scheduleRenew(ctx, u.ne.tuning.RetryBase)
		return
	}
	if r.lease.Token == u.lease.Token {
		u.lease = r.lease
	}
	u.status(func(s *UnitStatus) { s.LeaseExpiresAt = timePtr(r.lease.ExpiresAt) })
	u.scheduleRenew(ctx, u.spec.LeaseTTL/3)
}

// leaseLost drops everything not applied and stops: placement decides again.
func (u *unitActor) leaseLost(ctx actor.Context, where string) {
	u.ne.env.trace("lease-lost", u.id, fmt.Sprintf("token=%d at=%s", u.lease.Token, where))
	u.dropLease()
	u.status(func(s *UnitStatus) { s.LastError = "lease lost (" + where + "): another node owns the unit" })
	ctx.Send(u.sup, &unitEvent{unit: u.id, kind: evLeaseLost, pid: ctx.Self()})
	ctx.Stop(ctx.Self())
}

// ---- open ----

func (u *unitActor) open(ctx actor.Context) {
	u.closeRes()
	store, spec, part := u.ne.env.Store, u.spec, u.part
	unit, earliest := u.id, u.fromEarliest
	u.run(ctx, "open", func(c context.Context) any {
		if spec.isQueue() {
			rc, err := spec.Queue.Open(c, part.ID)
			if err != nil {
				return openResult{err: fmt.Errorf("open %s: %w", part.ID, err)}
			}
			return openResult{res: &resource{receiver: rc}}
		}
		cp, err := store.Checkpoint(c, unit)
		if err != nil && !errors.Is(err, persistence.ErrNotFound) {
			return openResult{err: fmt.Errorf("read checkpoint: %w", err)}
		}
		if cp.Finished {
			return openResult{checkpoint: cp}
		}
		start := brokers.Start{After: cp.Position, Mode: spec.Start}
		if earliest {
			start = brokers.Start{Mode: brokers.Earliest}
		}
		rd, err := spec.Stream.Open(c, part.ID, start)
		if err != nil {
			return openResult{checkpoint: cp, err: fmt.Errorf("open partition %s: %w", part.ID, err)}
		}
		return openResult{res: &resource{reader: rd}, checkpoint: cp}
	})
}

func (u *unitActor) onOpen(ctx actor.Context, r openResult) {
	if !u.spec.isQueue() {
		u.position = r.checkpoint.Position
		pos := u.position
		u.status(func(s *UnitStatus) { s.Position = pos })
	}
	if r.err != nil {
		if errors.Is(r.err, brokers.ErrPositionGone) {
			u.positionGone(r.err)
		}
		u.fail(ctx, r.err, stepOpen)
		return
	}
	if r.checkpoint.Finished {
		u.finished(ctx)
		return
	}
	u.res = r.res
	u.fromEarliest = false // reopened; from now on the checkpoint is where to start
	u.status(func(s *UnitStatus) { s.State = StateRunning; s.NextRetryAt = nil })
	u.fetch(ctx)
}

// positionGone: the broker deleted messages after our checkpoint before we
// read them. They are lost upstream; say so loudly and go on from the
// earliest message the broker still has.
func (u *unitActor) positionGone(err error) {
	u.fromEarliest = true
	u.ne.env.logger().Error("messages lost upstream: position no longer held by the broker; resuming at the earliest",
		"unit", u.id, "after", u.position, "error", err)
	u.ne.env.trace("position-gone", u.id, u.position)
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
		res.mu.Lock()
		defer res.mu.Unlock()
		if res.closed {
			return fetchResult{err: brokers.ErrClosed}
		}
		var r brokers.Result
		var err error
		if res.reader != nil {
			r, err = res.reader.Fetch(c, spec.BatchSize, spec.MaxWait)
		} else {
			r, err = res.receiver.Receive(c, spec.BatchSize, spec.MaxWait)
		}
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
		if errors.Is(r.err, brokers.ErrPositionGone) {
			u.positionGone(r.err)
			u.fail(ctx, fmt.Errorf("fetch: %w", r.err), stepOpen)
			return
		}
		u.fail(ctx, fmt.Errorf("fetch: %w", r.err), stepFetch)
		return
	}
	now := u.ne.env.Clock.Now()
	n := int64(len(r.res.Messages))
	u.status(func(s *UnitStatus) {
		s.Received += n
		s.LastPullAt = timePtr(now)
		s.Lag = r.res.Lag
	})
	u.ne.metrics.Received(u.spec.Name, u.id, n, r.res.Lag)
	pb := u.prepare(r.res)
	if pb == nil {
		u.fetch(ctx)
		return
	}
	u.apply(ctx, pb, 0)
}

// prepare decodes a fetch into a batch; nil when there is nothing to write.
func (u *unitActor) prepare(res brokers.Result) *pendingBatch {
	pb := &pendingBatch{msgs: res.Messages}
	b := &persistence.Batch{Source: u.spec.Name, Unit: u.id, Lease: u.lease, Table: u.spec.Table, Dedupe: u.spec.isQueue()}
	var handled map[string]brokers.Message
	for _, m := range res.Messages {
		if !u.spec.isQueue() && u.position != "" && brokers.ComparePositions(m.Position, u.position) <= 0 {
			continue // at or below the checkpoint: a re-read after a crash
		}
		var op persistence.Op
		if u.spec.Handler != nil {
			op = u.decoder.Raw(m)
		} else {
			op = u.decoder.Record(m)
		}
		if op.Kind == persistence.OpDeadLetter {
			pb.rejected++
		}
		if op.Kind == persistence.OpMessage {
			if handled == nil {
				handled = map[string]brokers.Message{}
			}
			handled[m.Position] = m
		}
		b.Ops = append(b.Ops, op)
		if !u.spec.isQueue() {
			b.Checkpoint = m.Position
		}
	}
	if res.End && !u.spec.isQueue() {
		b.Finished = true
		if b.Checkpoint == "" {
			b.Checkpoint = u.position
		}
	}
	if len(b.Ops) == 0 && !b.Finished {
		if u.spec.isQueue() && len(res.Messages) > 0 {
			pb.batch = b // nothing to write, but the messages need acks
			return pb
		}
		return nil
	}
	if handled != nil {
		b.Table = ""
		b.Handle = u.handle(b, handled)
	}
	pb.batch = b
	return pb
}

// handle adapts the user's Handler to the store's Handle hook.
func (u *unitActor) handle(b *persistence.Batch, msgs map[string]brokers.Message) func(context.Context, persistence.Tx, []persistence.Op) error {
	h, src, unit := u.spec.Handler, u.spec.Name, u.id
	return func(c context.Context, tx persistence.Tx, ops []persistence.Op) error {
		hb := Batch{Source: src, Unit: unit, IdempotencyKey: unit + "/" + firstLast(ops), Node: b.Lease.Owner, Token: b.Lease.Token}
		hb.Messages = make([]brokers.Message, 0, len(ops))
		for _, op := range ops {
			hb.Messages = append(hb.Messages, msgs[op.Position])
		}
		return h(c, tx, hb)
	}
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
	store := u.ne.env.Store
	pb.batch.Lease = u.lease
	u.run(ctx, "apply", func(c context.Context) any {
		a, err := store.Apply(c, pb.batch)
		return applyResult{batch: pb, applied: a, err: err, attempts: attempts}
	})
}

func (u *unitActor) onApply(ctx actor.Context, r applyResult) {
	pb := r.batch
	if r.err != nil {
		var perm *PermanentError
		switch {
		case errors.Is(r.err, persistence.ErrLeaseLost):
			u.leaseLost(ctx, "apply")
			return
		case errors.As(r.err, &perm) && r.attempts < len(pb.batch.Ops) && deadLetter(pb, perm):
			pb.rejected++
			u.apply(ctx, pb, r.attempts+1)
			return
		}
		if u.spec.isQueue() {
			// nothing to re-read: the messages come back after the nack
			u.nack(ctx, pb.msgs)
			u.fail(ctx, fmt.Errorf("apply: %w", r.err), stepFetch)
			return
		}
		// a stream reads its checkpoint again: the failed apply may have
		// committed
		u.fail(ctx, fmt.Errorf("apply: %w", r.err), stepOpen)
		return
	}
	b := pb.batch
	dup := make(map[string]bool, len(r.applied.Duplicates))
	for _, id := range r.applied.Duplicates {
		dup[id] = true
	}
	var applied, dead, rejected int64
	var sample *quality.Stats
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
	rejected = int64(pb.rejected)
	if rejected > dead {
		rejected = dead
	}
	if b.Checkpoint != "" {
		u.position = b.Checkpoint
	} else if len(b.Ops) > 0 && u.spec.isQueue() {
		u.position = b.Ops[len(b.Ops)-1].Position
	}
	pos := u.position
	u.status(func(s *UnitStatus) {
		s.Applied += applied
		s.DeadLettered += dead
		s.Rejected += rejected
		s.Position = pos
		if s.State == StateRetrying {
			s.State = StateRunning
			s.NextRetryAt = nil
		}
	})
	u.ne.metrics.Applied(u.spec.Name, u.id, applied, rejected, dead)
	if len(b.Ops) > 0 {
		u.ne.env.trace("applied", u.id, fmt.Sprintf("token=%d ops=%d dup=%d %s", b.Lease.Token, len(b.Ops), len(dup), firstLast(b.Ops)))
	}
	if sample != nil {
		ctx.Send(u.sup, &qualitySample{stats: sample})
	}
	u.healthy(ctx)
	if b.Checkpoint != "" {
		u.commitToBroker(ctx, b.Checkpoint)
	}
	if b.Finished {
		u.finished(ctx)
		return
	}
	if u.spec.isQueue() && len(pb.msgs) > 0 {
		u.ack(ctx, pb.msgs)
		return
	}
	u.fetch(ctx)
}

// commitToBroker tells a stream that records positions in the broker
// (brokers.Committer) where the unit is: at most once a second, in the
// background, and the newest position always reaches it (a position held
// back by the pacing is sent when the second is over). A failure is only
// logged: the store's checkpoint is the truth.
func (u *unitActor) commitToBroker(ctx actor.Context, pos string) {
	if _, ok := u.spec.Stream.(brokers.Committer); !ok {
		return
	}
	now := u.ne.env.Clock.Now()
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
	u.committedAt, u.commitPending = u.ne.env.Clock.Now(), ""
	part, unit, log := u.part.ID, u.id, u.ne.env.logger()
	u.ne.env.Executor.Go(exec.WithLabel(u.inc.ctx, "commit"), func(c2 context.Context) any {
		if err := c.Committed(c2, part, pos); err != nil && c2.Err() == nil {
			log.Warn("record position in the broker", "unit", unit, "position", pos, "error", err)
		}
		return nil
	}, func(any) {})
}

// deadLetter turns the op a handler refused into a dead letter; false when
// the error names no op of the batch.
func deadLetter(pb *pendingBatch, perm *PermanentError) bool {
	for i, op := range pb.batch.Ops {
		if op.Position == perm.Position && op.Kind == persistence.OpMessage {
			pb.batch.Ops[i] = persistence.Op{Kind: persistence.OpDeadLetter, Position: op.Position, MessageID: op.MessageID,
				MsgKey: op.Key, Payload: op.Payload, Reason: "handler: " + perm.Err.Error()}
			return true
		}
	}
	return false
}

// healthy resets the failure count after a success, and tells the
// supervisor once the unit has run long enough to reset its restart backoff.
func (u *unitActor) healthy(ctx actor.Context) {
	u.failures = 0
	if !u.reportedHealthy && u.ne.env.Clock.Now().Sub(u.started) >= u.ne.tuning.HealthyAfter {
		u.reportedHealthy = true
		ctx.Send(u.sup, &unitEvent{unit: u.id, kind: evHealthy, pid: ctx.Self()})
	}
}

func (u *unitActor) ack(ctx actor.Context, msgs []brokers.Message) {
	res := u.res
	u.run(ctx, "ack", func(c context.Context) any {
		err := res.receiver.Ack(c, msgs)
		return ackResult{n: len(msgs), err: err}
	})
}

func (u *unitActor) onAck(ctx actor.Context, r ackResult) {
	if r.err != nil {
		// Harmless: the messages come back and the dedupe table refuses them.
		msg := fmt.Sprintf("ack: %v", r.err)
		u.status(func(s *UnitStatus) { s.LastError = msg })
	} else {
		n := int64(r.n)
		u.status(func(s *UnitStatus) { s.Acked += n })
		u.ne.metrics.Acked(u.spec.Name, u.id, n)
	}
	u.fetch(ctx)
}

// nack gives messages back after a failed apply (best effort, no result).
func (u *unitActor) nack(ctx actor.Context, msgs []brokers.Message) {
	res, delay := u.res, u.spec.NackDelay
	u.ne.env.Executor.Go(exec.WithLabel(u.inc.ctx, "nack"), func(c context.Context) any {
		return res.receiver.Nack(c, msgs, delay)
	}, func(any) {})
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
		u.status(func(s *UnitStatus) { s.LastError = msg })
		panic(&unitFailure{unit: u.id, err: err})
	}
	if u.stopping {
		u.finishStop(ctx, false)
		return
	}
	d := backoff(u.ne.env.Rand, u.failures, u.ne.tuning.RetryBase, u.ne.tuning.RetryCap)
	next := u.ne.env.Clock.Now().Add(d)
	u.status(func(s *UnitStatus) {
		s.State = StateRetrying
		s.LastError = msg
		s.NextRetryAt = timePtr(next)
	})
	u.resumeAt = at
	u.retry = u.after(ctx, d, timerRetry)
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
	default:
		u.fetch(ctx)
	}
}

// finished: the unit was read to its end and that is recorded; release the
// lease and stop for good (its children can start).
func (u *unitActor) finished(ctx actor.Context) {
	u.ne.env.trace("finished", u.id, u.position)
	ctx.Send(u.sup, &unitEvent{unit: u.id, kind: evFinished, pid: ctx.Self()})
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
	u.finishStop(ctx, false)
}

// finishStop releases the lease (unless forced) and stops the actor.
func (u *unitActor) finishStop(ctx actor.Context, force bool) {
	if u.releasing && !force {
		return
	}
	if force || !u.hasLease {
		ctx.Stop(ctx.Self())
		return
	}
	u.releasing = true
	u.closeRes()
	store, l := u.ne.env.Store, u.lease
	u.runSide(ctx, "release", func(c context.Context) any {
		return releaseResult{err: store.Release(c, l)}
	})
}

func (u *unitActor) onRelease(ctx actor.Context, r releaseResult) {
	if r.err == nil {
		u.ne.env.trace("released", u.id, fmt.Sprintf("token=%d", u.lease.Token))
	}
	u.dropLease()
	ctx.Stop(ctx.Self())
}

// dropLease forgets the lease, in the tree too, at once: a successor may
// acquire it before this actor has finished stopping, and the tree must not
// show two holders.
func (u *unitActor) dropLease() {
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
	for _, t := range []clock.Timer{u.retry, u.renewT, u.stopTimer} {
		if t != nil {
			t.Stop()
		}
	}
	u.closeRes()
	held, l, store := u.hasLease, u.lease, u.ne.env.Store
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
// broker I/O and never runs on the mailbox. A fetch still using it is
// waited for (the resource's lock), after its context was cancelled.
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
