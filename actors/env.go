package actors

import (
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/trace"

	"github.com/drover-dev/drover/actors/events"
	"github.com/drover-dev/drover/actors/placement"
	"github.com/drover-dev/drover/internal/clock"
	"github.com/drover-dev/drover/internal/exec"
	"github.com/drover-dev/drover/persistence"
)

// Clock, Timer and Executor are the time and the I/O executor the runtime
// takes from outside. They live in the leaf packages internal/clock and
// internal/exec (brokers and stores use them too, below the runtime) and
// are named here for library users who bring their own.
type (
	Clock    = clock.Clock
	Timer    = clock.Timer
	Executor = exec.Executor
)

// RealClock is the machine's clock, what a nil Clock means.
type RealClock = clock.Real

// Env is everything a node's actors take from outside. Production wires
// real parts (node.Start does); the testkit wires deterministic ones.
type Env struct {
	// Node is this node's name, unique in the cluster.
	Node string
	// Clock gives time and timers. Timer callbacks only send messages.
	Clock clock.Clock
	// Rand is the node's seeded random source (backoff jitter).
	Rand *Rand
	// Dispatcher runs mailboxes; nil means protoactor's goroutine
	// dispatcher (a new goroutine per mailbox run). A node process runs
	// them on its job pool (exec.Dispatcher); the testkit's runs them on
	// its one goroutine.
	Dispatcher actor.Dispatcher
	// Executor runs every broker and store call.
	Executor exec.Executor
	// Membership is this node's view of the cluster.
	Membership placement.Membership
	// MaxCapacity is cluster.max_capacity: placement counts a member's
	// capacity as at most this, or as at most the smallest value an alive
	// member gossips if that is less (placement.EffectiveMaxCapacity); the
	// Membership should gossip it as the local member's MaxCapacity. 0
	// means placement.DefaultMaxCapacity.
	MaxCapacity float64
	// Store is the database.
	Store persistence.Store
	// Logger receives the node's logs; nil discards.
	Logger *slog.Logger
	// Trace, when set, is called with every event the actors record
	// (acquired, applied, lease lost, restarted, ...), from the actor's
	// goroutine. The testkit hashes them into its run digest.
	Trace func(Event)
	// Metrics receives counters; nil means none.
	Metrics Metrics
	// Events is the node's log of why its units are where they are
	// (placement decisions, lease acquisitions, takeovers and losses,
	// restarts, position resets); nil records nothing. The runtime records
	// per unit decision, never per message. Callers outside the runtime
	// (controls) record into the same log.
	Events *events.Log
	// Tracer, when set, receives the spans of every batch (fetch, decode,
	// apply: trace.go); nil means no tracing, at no cost.
	Tracer trace.Tracer
	// ApplyAlone makes every batch a store call of its own
	// (node.group_commit: false). By default, when Store implements
	// persistence.GroupApplier, the batches of several units that are
	// ready while the store is busy share one call (group commit: the
	// node's committer, groupcommit.go).
	ApplyAlone bool
	// Tuning; zero values mean the defaults.
	Tuning Tuning
	// Placement, when set, is called instead of placement.Owned and must
	// return what it returns for the same arguments (it is a pure
	// function), without changing units or members. The testkit's scale
	// mode shares one memo of it among its simulated nodes, which compute
	// the same placement from the same views, and times it. nil means
	// placement.Owned.
	Placement func(self string, units []string, members []placement.Member, maxCapacity float64) []string
}

// Tuning holds the runtime's timing knobs.
type Tuning struct {
	// RestartBase and RestartCap bound the supervisor's exponential backoff
	// with full jitter (default 1 s and 60 s).
	RestartBase, RestartCap time.Duration
	// RetryBase and RetryCap bound a unit's wait between consecutive
	// failures before it gives up (default 100 ms and 5 s).
	RetryBase, RetryCap time.Duration
	// AcquireRetry is how often a unit asks again for a lease held by a
	// live member (default 250 ms).
	AcquireRetry time.Duration
	// LeaseLostPause is how long a supervisor waits before starting a unit
	// again after it lost its lease (default 1 s).
	LeaseLostPause time.Duration
	// StopTimeout bounds a graceful stop of a unit (default 10 s).
	StopTimeout time.Duration
	// ParentPoll is how often a unit waiting for its parent partitions
	// checks their checkpoints (default 1 s).
	ParentPoll time.Duration
	// HealthyAfter resets a unit's restart backoff once it has run that
	// long without failing (default 30 s); the same for a source
	// supervisor's.
	HealthyAfter time.Duration
	// RenewInterval is how often a node renews all the leases it holds, in
	// one store call (default 500 ms, at most a third of the shortest lease
	// TTL).
	RenewInterval time.Duration
	// TakeoverMargin is added to RenewInterval to tell a holder that
	// stopped renewing (dead, or cut off from the store) from one whose
	// renewal is merely late: a lease whose holder is absent from the
	// membership view is taken over once its last renewal is older than
	// RenewInterval + TakeoverMargin by the store's clock (default 500 ms).
	TakeoverMargin time.Duration
	// PositionCheck is how often a unit whose checkpoint is no longer a
	// position of the broker, under on_position_reset: fail, looks again
	// whether an operator moved it (default 30 s).
	PositionCheck time.Duration
	// DiscoverySpacing is the least time between two discoveries of a
	// source that gossip triggers (another member saw other units)
	// (default 2 s).
	DiscoverySpacing time.Duration
	// RetryLogEvery rate-limits a unit's WARN lines about retrying, and
	// those about records the store refuses (dead-lettered): after
	// one, the next comes at most that much later, counting the ones left
	// out (default 30 s).
	RetryLogEvery time.Duration
	// NoFetchAhead switches off a stream unit's fetch ahead: by default it
	// fetches its next batch while the current one is applied (at most one
	// batch ahead, architecture §13).
	NoFetchAhead bool
	// WakeSafety bounds the wait of an idle unit whose reader tells when
	// messages may arrive (brokers.Waker): it fetches again after that long
	// even if it was not woken, so that a broker that misses a call cannot
	// wedge it (default 30 s).
	WakeSafety time.Duration
	// PassivateAfter is how long an idle unit on a brokers.Waker waits,
	// counted from the last fetch that returned messages, before it gives
	// up its actor: its supervisor keeps what it needs (lease, reader,
	// position) and spawns it again when the Waker calls or WakeSafety is
	// up (architecture §13, passivation; default 5 s).
	PassivateAfter time.Duration
	// NoPassivate keeps idle units' actors (no passivation).
	NoPassivate bool
	// SeekExpiry bounds how long a seek asked through the controls table
	// may wait for its unit's owner (node.seek_expiry, default 5 min,
	// counted by the store's clock, persistence.Control.SeekAge): an
	// owner never carries out an older one (it marks it done, expired,
	// under its lease), and any node marks one still pending
	// SeekExpiryGrace later done, expired (unit_seekrow.go).
	SeekExpiry time.Duration
	// MaxStarting bounds the units of the node starting at once: spawned
	// and not yet at their first fetch (startgate.go). The others
	// wait for a slot in their supervisor; while some wait, idle units
	// that have received nothing since their start passivate at once.
	// 0: DefaultMaxStarting; negative: no bound.
	MaxStarting int
	// StartSlotFor bounds how long a unit holds its start slot: an
	// acquisition or open that hangs (a broker that never answers) gives
	// it back then, so that one source cannot keep the node's others from
	// starting (default 10 s).
	StartSlotFor time.Duration
}

// DefaultMaxStarting is Tuning.MaxStarting's default.
const DefaultMaxStarting = 256

// DefaultSeekExpiry is Tuning.SeekExpiry's default.
const DefaultSeekExpiry = 5 * time.Minute

// SeekExpiryGrace is how long past Tuning.SeekExpiry a pending seek waits
// for its unit's owner to mark it expired under its lease before any node
// marks it (Controls.ExpireSeek): the owner's mark shows in its tree.
const SeekExpiryGrace = 30 * time.Second

// DefaultPassivateAfter is Tuning.PassivateAfter's default.
const DefaultPassivateAfter = 5 * time.Second

func (t Tuning) withDefaults() Tuning {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&t.RestartBase, time.Second)
	def(&t.RestartCap, 60*time.Second)
	def(&t.RetryBase, 100*time.Millisecond)
	def(&t.RetryCap, 5*time.Second)
	def(&t.AcquireRetry, 250*time.Millisecond)
	def(&t.LeaseLostPause, time.Second)
	def(&t.StopTimeout, 10*time.Second)
	def(&t.ParentPoll, time.Second)
	def(&t.HealthyAfter, 30*time.Second)
	def(&t.RenewInterval, 500*time.Millisecond)
	def(&t.TakeoverMargin, 500*time.Millisecond)
	def(&t.PositionCheck, 30*time.Second)
	def(&t.DiscoverySpacing, 2*time.Second)
	def(&t.RetryLogEvery, 30*time.Second)
	def(&t.WakeSafety, 30*time.Second)
	def(&t.PassivateAfter, DefaultPassivateAfter)
	def(&t.StartSlotFor, 10*time.Second)
	def(&t.SeekExpiry, DefaultSeekExpiry)
	if t.MaxStarting == 0 {
		t.MaxStarting = DefaultMaxStarting
	}
	return t
}

// Rand is a seeded random source safe for concurrent use.
type Rand struct {
	mu sync.Mutex
	r  *rand.Rand
}

// NewRand returns a Rand seeded with seed.
func NewRand(seed uint64) *Rand {
	return &Rand{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// Int64N returns a number in [0, n); 0 when n <= 0.
func (r *Rand) Int64N(n int64) int64 {
	if n <= 0 {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.r.Int64N(n)
}

// Jitter returns a duration in [0, d] (full jitter).
func (r *Rand) Jitter(d time.Duration) time.Duration {
	return time.Duration(r.Int64N(int64(d) + 1))
}

// backoff is base·2^(n-1) capped at limit, with full jitter: a uniformly
// random wait in [0, that]. n counts failures from 1.
func backoff(r *Rand, n int, base, limit time.Duration) time.Duration {
	d := base
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	if d > limit {
		d = limit
	}
	return r.Jitter(d)
}

func (e *Env) logger() *slog.Logger {
	if e.Logger == nil {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return e.Logger
}

// Event is one thing that happened in the runtime, for traces.
type Event struct {
	Time   time.Time
	Node   string
	Unit   string // or the source name for source events
	Kind   string // acquired, applied, lease-lost, failed, restarting, released, stopped, ...
	Detail string
}

func (e *Env) trace(kind, unit, detail string) {
	if e.Trace != nil {
		e.Trace(Event{Time: e.Clock.Now(), Node: e.Node, Unit: unit, Kind: kind, Detail: detail})
	}
}
