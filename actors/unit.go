package actors

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/drover-dev/drover/actors/decode"
	"github.com/drover-dev/drover/actors/quality"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/internal/clock"
	"github.com/drover-dev/drover/internal/exec"
	"github.com/drover-dev/drover/persistence"
)

// unit actor: one per unit this node owns.
//
// Life cycle: unitPhase (unit_phase.go). Invariants:
//   - at most one main-line job is in flight (parents, acquire, open,
//     fetch, apply, ack, nack), and besides it at most one fetch ahead: a
//     stream unit whose apply is in flight fetches its next batch meanwhile
//     when the fetch applied left it behind (unit_ahead.go). So the reader or receiver is used by one job at a
//     time (while the fetch ahead runs, the main-line job is an apply,
//     which uses only the store); the only side job that touches a
//     receiver, the deadline extension of the batch in flight, takes the
//     connection's lock like every receiver job;
//   - at most one fetch is ahead of the batch applied: it is applied only
//     after every batch of the fetch before it committed, in order; a
//     failed apply, a stop or a lost lease drops it unapplied, and after a
//     failure the reader is opened again at the checkpoint before the
//     next fetch (what the reader had passed is read again, nothing is
//     skipped; what was applied is at or below the checkpoint and dropped
//     as a re-read);
//   - an idle unit (its last fetch returned nothing) whose reader or
//     receiver is a brokers.Waker has no job in flight: it waits for the
//     broker's call (woken, checked against the incarnation and the
//     arrangement like a timer) or the WakeSafety timer, and then fetches
//     without waiting; a stop, a lost lease, a restart or a reopen cancels
//     the arrangement; after PassivateAfter without messages it passivates
//     (unit_passive.go): the actor stops, its supervisor keeps the lease
//     and the reader, and spawns it again to fetch when the Waker calls;
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
	node       *nodeEnv // what the node's actors share: env, tuning, tree, metrics, leaser
	spec       *SourceSpec
	id         string            // "<source>/<partition>"
	gen        uint64            // of its entry in the tree (child.gen)
	part       brokers.Partition // for queues ID is the slot
	supervisor *actor.PID
	// initial: the unit was one of the source's units at its first
	// discovery (persistence.Sources), so a unit with no checkpoint starts
	// as spec.Start says; other units start at their earliest.
	initial bool
	// staleFinish: its checkpoint says finished, but of an earlier stream
	// of the same name (the supervisor saw it listed without children).
	staleFinish bool
	// exit tells the supervisor why the unit stopped itself (child.exit).
	exit *atomic.Int32
	// handoff is where a passivating unit leaves its record (child.handoff);
	// record, when set, is the record the actor is spawned from
	// (unit_passive.go).
	handoff *passiveHandoff
	// slot is the child's start slot (startgate.go): released at the first
	// fetch's start, a wait, a failure, a pause, a stop or the actor's end.
	slot   *startSlot
	record *passiveUnit

	incarnation *incarnation // this instance's jobs and timers

	phase      unitPhase // only becomeX write it
	lease      persistence.Lease
	holdsLease bool        // from a won Acquire until the release (or the loss): not a phase, see unitPhase
	conn       *brokerConn // the open reader or receiver; nil before the open
	position   string      // last applied position (streams; "" before the first)
	checkpoint string      // the stored checkpoint: a position or a start marker
	resetCause error       // the checkpoint is no longer a broker position: the next open resets it
	resetFrom  string      // the checkpoint resetCause is about
	justReset  bool        // the last open reset the checkpoint, nothing read since

	held        *pendingBatch // the batch being applied or retried (queues: until acked or nacked)
	failures    int
	resumeAt    step
	inflight    int                // main-line jobs in flight
	cancelFetch context.CancelFunc // cancels the fetch in flight; nil when the job in flight is no fetch
	ahead       fetchAhead         // the fetch ahead of the apply in flight (streams)
	seek        *seekUnit          // a seek asked and not yet answered (unit_seek.go)
	lastSeek    *seekOutcome       // the last seek with a control id it finished (unit_seekrow.go)
	lag         lagTrack           // the lag once the fetch in hand is applied
	wake        wakeWait           // an idle unit's wait for its Waker
	stopTimer   clock.Timer
	retryTimer  clock.Timer
	extendTimer clock.Timer

	waitNoteShown  bool // last_error holds a waiting note (parents, a lease held elsewhere), not an error
	recovering     bool // failed since the last success (or restarted after failing): the next success is a recovery
	committedAt    time.Time
	commitPending  string      // newest position not yet sent to a Committer
	commitRefused  atomic.Bool // the Committer refused for good (none configured): do not call it
	decoder        decode.Config
	started        time.Time
	healthReported bool      // the supervisor was told the unit ran HealthyAfter (once per instance)
	busyAt         time.Time // the last fetch that returned messages (or the start): PassivateAfter counts from it
}

// incarnation scopes the jobs and timers of one actor instance: results
// that arrive after it ended (stopped or restarted) are dropped, and its
// jobs in flight are cancelled when it ends. Their context exists only
// while a job is in flight: an idle unit (waiting for its Waker) holds
// none, which keeps idle units cheap (a cancel context registers itself
// with its parent).
type incarnation struct {
	parent context.Context
	ended  atomic.Bool

	mu     sync.Mutex
	ctx    context.Context // of the jobs in flight; nil when there are none
	cancel context.CancelFunc
	jobs   int
}

func newIncarnation(parent context.Context) *incarnation { return &incarnation{parent: parent} }

// begin returns the context for a job of the incarnation and the function
// the job calls when it returns. Once the incarnation ended, the context
// is cancelled already.
func (i *incarnation) begin() (context.Context, func()) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.ended.Load() {
		c, cancel := context.WithCancel(i.parent)
		cancel()
		return c, func() {}
	}
	if i.ctx == nil {
		i.ctx, i.cancel = context.WithCancel(i.parent)
	}
	i.jobs++
	return i.ctx, i.done
}

func (i *incarnation) done() {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.jobs--; i.jobs == 0 && i.cancel != nil {
		i.cancel()
		i.ctx, i.cancel = nil, nil
	}
}

// end marks the incarnation ended and cancels its jobs in flight.
func (i *incarnation) end() {
	i.ended.Store(true)
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.cancel != nil {
		i.cancel()
	}
}

// goJob runs job on the executor under the incarnation's context, labelled,
// and then calls then with its result (on the executor's goroutine).
func (i *incarnation) goJob(x exec.Executor, label string, job func(context.Context) any, then func(any)) context.CancelFunc {
	c, done := i.begin()
	return x.Go(exec.WithLabel(c, label), func(c context.Context) any {
		defer done()
		return job(c)
	}, then)
}

// brokerConn guards a Reader or Receiver: every call on it holds mu, so two
// jobs never use it at once and Close never runs while one does.
type brokerConn struct {
	mu       sync.Mutex
	reader   brokers.Reader
	receiver brokers.Receiver
	closed   bool
}

// use runs f with the connection locked; a closed one gives ErrClosed.
func (r *brokerConn) use(f func() error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return brokers.ErrClosed
	}
	return f()
}

func (r *brokerConn) close() {
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
		incarnation *incarnation
		v           any
	}
	timerFired struct {
		incarnation *incarnation
		kind        timerKind
	}
	// woken is a Waker's call for the arrangement seq of an incarnation.
	woken struct {
		incarnation *incarnation
		seq         uint64
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
	timerWake
	timerPassivate
	timerStartSlot
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
		conn       *brokerConn
		checkpoint string // the stored checkpoint after the open
		finished   bool
		resolved   string     // the start resolved and recorded now
		streamID   string     // the stream id recorded with resolved
		reset      *resetInfo // the checkpoint was reset now
		operator   error      // the checkpoint is invalid and on_position_reset is fail
		err        error
		brokerErr  bool // err came from the broker
	}
	fetchResult struct {
		fetched brokers.Result
		err     error
		// schemaErr: the fetch is read but the schema registry could not
		// be asked for its schemas (decode.ErrRegistry); it is not decoded
		schemaErr error
		// ahead: a fetch ahead, the seq-th of the incarnation
		ahead bool
		seq   uint64
		span  spanTimes // when the fetch ran, with a Tracer (trace.go)
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
	// trace is the fetch's spans, with a Tracer (trace.go); nil without.
	trace *batchTrace
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

func newUnit(node *nodeEnv, spec *SourceSpec, p brokers.Partition, initial bool) *unitActor {
	return &unitActor{
		node: node, spec: spec, part: p, id: spec.Name + "/" + p.ID, initial: initial,
		decoder: spec.decodeConfig(),
		exit:    new(atomic.Int32),
	}
}

func (u *unitActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		u.supervisor = ctx.Parent()
		u.incarnation = newIncarnation(u.node.ctx)
		if r := u.record; r != nil {
			u.record = nil
			u.resumeFrom(ctx, r)
			return
		}
		u.started = u.node.env.Clock.Now()
		u.busyAt = u.started
		if u.slot != nil && u.slot.Load() {
			u.after(ctx, u.node.tuning.StartSlotFor, timerStartSlot)
		}
		u.becomeStarting(noRetryAt)
		u.node.env.trace("started", u.id, "")
		if len(u.part.Parents) > 0 && !u.spec.isQueue() {
			u.checkParents(ctx)
		} else {
			u.acquire(ctx)
		}
	case *jobDone:
		if m.incarnation != u.incarnation {
			return // a result of an earlier incarnation
		}
		u.onJob(ctx, m.v)
	case *timerFired:
		if m.incarnation != u.incarnation {
			return
		}
		u.onTimer(ctx, m.kind)
	case *woken:
		if m.incarnation != u.incarnation {
			return
		}
		u.onWoken(ctx, m.seq)
	case *stopUnit:
		u.beginStop(ctx)
	case *controlsChanged:
		u.onControls(ctx)
	case *seekUnit:
		u.requestSeek(ctx, m)
	case *parentsListed:
		u.part.Parents = m.parents
	case *leaseLostNote:
		if u.holdsLease && m.token == u.lease.Token && u.phase != phaseReleasing {
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
func (u *unitActor) status(f func(*treeUnit)) { u.node.reg.unit(u.spec.Name, u.id, u.gen, f) }

func (u *unitActor) now() time.Time { return u.node.env.Clock.Now() }

// runMainJob hands a main-line job (parents, acquire, open, fetch, apply,
// ack, nack: one at a time, counted in inflight) to the executor; its
// result comes back as a jobDone.
func (u *unitActor) runMainJob(ctx actor.Context, label string, job func(context.Context) any) context.CancelFunc {
	u.inflight++
	return u.runSideJob(ctx, label, job)
}

// runSideJob hands a job that may run beside the main-line one (release,
// extend) to the executor, uncounted; its result comes back as a jobDone.
func (u *unitActor) runSideJob(ctx actor.Context, label string, job func(context.Context) any) context.CancelFunc {
	self, current, root := ctx.Self(), u.incarnation, ctx.ActorSystem().Root
	return current.goJob(u.node.env.Executor, label, job, func(v any) {
		if current.ended.Load() {
			return
		}
		root.Send(self, &jobDone{incarnation: current, v: v})
	})
}

func (u *unitActor) after(ctx actor.Context, d time.Duration, kind timerKind) clock.Timer {
	self, current, root := ctx.Self(), u.incarnation, ctx.ActorSystem().Root
	return u.node.env.Clock.AfterFunc(d, func() {
		if current.ended.Load() {
			return
		}
		root.Send(self, &timerFired{incarnation: current, kind: kind})
	})
}

func (u *unitActor) onTimer(ctx actor.Context, k timerKind) {
	switch k {
	case timerRetry:
		u.retryTimer = nil
		u.resume(ctx)
	case timerStopDeadline:
		u.node.env.trace("stop-timeout", u.id, "")
		u.finishStop(ctx, true)
	case timerParents:
		u.checkParents(ctx)
	case timerAcquire:
		u.acquire(ctx)
	case timerCommit:
		if u.commitPending != "" && !u.commitRefused.Load() {
			u.sendCommit(u.commitPending)
		}
	case timerExtend:
		u.extendTimer = nil
		u.extend(ctx)
	case timerWake:
		u.onWakeSafety(ctx)
	case timerPassivate:
		u.onPassivateTimer(ctx)
	case timerStartSlot:
		u.releaseStart() // still starting after StartSlotFor: a hung step holds no slot
	}
}

func (u *unitActor) onJob(ctx actor.Context, v any) {
	if r, ok := v.(fetchResult); ok && r.ahead {
		u.onAhead(ctx, r) // counted as main-line only once awaited
		return
	}
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
	case seekResult:
		u.onSeek(ctx, r)
	}
}
