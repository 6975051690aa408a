package actors

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/drover-dev/drover/actors/placement"
	"github.com/drover-dev/drover/internal/clock"
	"github.com/drover-dev/drover/internal/exec"
	"github.com/drover-dev/drover/persistence"
)

// Metrics receives the runtime's counters. Production wires Prometheus;
// nil means none. Calls come from actor goroutines and must not block.
type Metrics interface {
	Received(source, unit string, n int64)
	// Lag records the unit's lag (messages behind, and what lag_seconds
	// is measured from): after each fetch and each applied fetch.
	Lag(source, unit string, lag Lag)
	Applied(source, unit string, applied, rejected, deadLettered int64)
	Acked(source, unit string, n int64)
	Restarted(source, unit string)
	LeaseChanged(source, unit string)
	// PositionReset counts checkpoints reset because the broker no longer
	// had their position (on_position_reset).
	PositionReset(source, unit string)
	// UnitState records the state a unit's tree entry shows now (one of
	// the State constants), each time it changes. It is called with the
	// tree's lock held: it must not call back into the Node (Tree) or
	// block.
	UnitState(source, unit, state string)
	// Forget drops a unit's series: it no longer runs on this node.
	Forget(source, unit string)
}

// noMetrics is the Metrics of a node given none.
type noMetrics struct{}

func (noMetrics) Received(string, string, int64)              {}
func (noMetrics) Lag(string, string, Lag)                     {}
func (noMetrics) Applied(string, string, int64, int64, int64) {}
func (noMetrics) Acked(string, string, int64)                 {}
func (noMetrics) Restarted(string, string)                    {}
func (noMetrics) LeaseChanged(string, string)                 {}
func (noMetrics) PositionReset(string, string)                {}
func (noMetrics) UnitState(string, string, string)            {}
func (noMetrics) Forget(string, string)                       {}

// nodeEnv is what every actor of a node shares. Immutable after Start,
// except reg which locks itself and digest (atomic).
type nodeEnv struct {
	env     Env
	tuning  Tuning
	reg     *registry
	metrics Metrics
	system  *actor.ActorSystem
	// ctx is cancelled when the node is closed; background jobs (releases
	// after a hard stop) run under it.
	ctx context.Context
	// leaser renews the node's leases (set before any unit starts);
	// nodePID is the node actor.
	leaser *actor.PID
	// committer is the node's group committer (groupcommit.go); nil when
	// every batch is applied alone (no GroupApplier, or Env.ApplyAlone).
	committer *actor.PID
	nodePID   atomic.Pointer[actor.PID] // set once the node actor is spawned (after the leaser)
	// digest is placement.SourceDigestOf this node's source ids: a member
	// gossiping only a digest equal to it runs the same sources. The node
	// actor changes it when a source is added or removed (node_sources.go).
	digest atomic.Uint64
	// minTTL is the shortest lease TTL of the node's sources.
	minTTL time.Duration
	// controls is the node's view of the controls table (controls.go);
	// nil pauses nothing.
	controls *controlView
	// starts bounds the units starting at once (Tuning.MaxStarting).
	starts *startGate
	// observePhase, when set, is told every phase transition of a unit
	// (on its mailbox). Only the unit scripts set it, to show and count
	// the transitions they cover.
	observePhase func(unit string, from, to unitPhase)
}

func (e *nodeEnv) props() []actor.PropsOption {
	if e.env.Dispatcher == nil {
		return nil
	}
	return []actor.PropsOption{actor.WithDispatcher(e.env.Dispatcher)}
}

func (e *nodeEnv) root() *actor.RootContext { return e.system.Root }

// liveNames are the members alive in this node's view (for lease takeover).
func (e *nodeEnv) liveNames() []string {
	ms := e.env.Membership.Members()
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.Name)
	}
	return out
}

// Node is one drover process's actor system: a root actor with one source
// supervisor per source. It starts no goroutines itself; the dispatcher and
// executor in Env decide where actors and jobs run.
type Node struct {
	node     *nodeEnv
	root     *actor.PID
	stop     func()
	cancel   context.CancelFunc
	mu       sync.Mutex
	drained  chan struct{}
	draining bool
	closed   bool
}

// Start builds a node's actors and starts them.
func Start(env Env, specs []SourceSpec) (*Node, error) {
	if env.Node == "" || env.Clock == nil || env.Rand == nil || env.Executor == nil || env.Membership == nil || env.Store == nil {
		return nil, errors.New("actors: Env needs Node, Clock, Rand, Executor, Membership and Store")
	}
	seen := map[string]bool{}
	full := make([]*SourceSpec, 0, len(specs))
	for _, s := range specs {
		s, err := s.withDefaults()
		if err != nil {
			return nil, err
		}
		if seen[s.Name] {
			return nil, fmt.Errorf("source %s: name used twice", s.Name)
		}
		seen[s.Name] = true
		full = append(full, &s)
	}
	logger := env.logger()
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	compactRegistry(system)
	ctx, cancel := context.WithCancel(context.Background())
	shared := &nodeEnv{env: env, tuning: env.Tuning.withDefaults(), reg: newRegistry(env.Node), system: system, ctx: ctx,
		controls: newControlView()}
	shared.env.Logger = logger
	shared.starts = newStartGate(max(shared.tuning.MaxStarting, 0))
	shared.metrics = env.Metrics
	if shared.metrics == nil {
		shared.metrics = noMetrics{}
	}
	shared.reg.stateChanged = shared.metrics.UnitState
	shared.reg.now = env.Clock.Now
	n := &Node{node: shared, cancel: cancel, drained: make(chan struct{})}
	var minTTL time.Duration
	for _, s := range full {
		shared.reg.addSource(s.Name, s.Type)
		if minTTL == 0 || s.LeaseTTL < minTTL {
			minTTL = s.LeaseTTL
		}
	}
	shared.digest.Store(digestOf(full))
	shared.minTTL = minTTL
	if shared.minTTL <= 0 {
		shared.minTTL = 10 * time.Second
	}
	table := newLeaseTable()
	lprops := actor.PropsFromProducer(func() actor.Actor { return newLeaser(shared, minTTL, table) }, shared.props()...)
	lpid, err := system.Root.SpawnNamed(lprops, "leaser")
	if err != nil {
		cancel()
		return nil, fmt.Errorf("spawn leaser: %w", err)
	}
	shared.leaser = lpid
	if g, ok := groupCommits(&shared.env); ok {
		cprops := actor.PropsFromProducer(func() actor.Actor { return newCommitter(shared, g) }, shared.props()...)
		cpid, err := system.Root.SpawnNamed(cprops, "committer")
		if err != nil {
			cancel()
			return nil, fmt.Errorf("spawn committer: %w", err)
		}
		shared.committer = cpid
	}
	props := actor.PropsFromProducer(func() actor.Actor { return &nodeActor{shared: shared, specs: full, node: n} }, shared.props()...)
	pid, err := system.Root.SpawnNamed(props, "node")
	if err != nil {
		cancel()
		return nil, fmt.Errorf("spawn node actor: %w", err)
	}
	n.root = pid
	shared.nodePID.Store(pid)
	n.stop = env.Membership.Watch(func() { system.Root.Send(pid, &viewChanged{}) })
	return n, nil
}

// Name is the node's name.
func (n *Node) Name() string { return n.node.env.Node }

// Tree returns a snapshot of this node's actor tree (architecture §10).
// Safe from any goroutine.
func (n *Node) Tree() Tree {
	ms := n.node.env.Membership.Members()
	t := Tree{Node: n.node.env.Node, Members: make([]MemberStatus, 0, len(ms)), Sources: n.node.reg.snapshot()}
	for _, m := range ms {
		t.Members = append(t.Members, MemberStatus{Name: m.Name, Addr: m.Addr, State: string(m.State)})
	}
	sort.Slice(t.Members, func(i, j int) bool { return t.Members[i].Name < t.Members[j].Name })
	return t
}

// Drain stops every unit gracefully (finish the batch in flight, checkpoint,
// release the lease). The returned channel is closed when all are stopped.
// Announce "leaving" in membership first so others do not wait for expiry.
func (n *Node) Drain() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.draining && !n.closed {
		n.draining = true
		n.node.system.Root.Send(n.root, &drain{})
	}
	return n.drained
}

// Close stops the node at once: jobs are cancelled, leases are left to
// expire or be taken over. It does not wait for executor jobs; whoever owns
// the executor waits for them.
func (n *Node) Close() {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	n.closed = true
	n.mu.Unlock()
	if n.stop != nil {
		n.stop()
	}
	n.cancel()
	n.node.system.Root.Stop(n.root)
	n.node.system.Root.Stop(n.node.leaser)
	if n.node.committer != nil {
		n.node.system.Root.Stop(n.node.committer)
	}
	n.node.system.Shutdown()
}

// CrashSupervisor makes the supervisor of source fail as a bug would (a
// panic), for fault injection: its node restarts it after a backoff.
func (n *Node) CrashSupervisor(source string) {
	n.node.system.Root.Send(n.root, &crashSource{source: source})
}

type viewChanged struct{}

// nodeActor is the root of a node's tree.
type nodeActor struct {
	shared   *nodeEnv
	specs    []*SourceSpec
	node     *Node
	sups     map[string]*actor.PID
	byPID    map[string]string
	pending  map[string]bool // sources not yet drained
	draining bool
	// started: the start-up sweep is over and the supervisors run;
	// removing are the sources being removed, with who waits for it
	// (node_sources.go).
	started  bool
	removing map[string]chan error

	// tags are the sources this node runs, as gossiped (by source name).
	tags       map[string]placement.SourceTag
	announcing bool // a SetSources job is in flight
	reannounce bool // tags changed while it was

	// restarts counts consecutive supervisor restarts (backoff exponent);
	// restartedAt is when each was last restarted; down are the sources
	// whose supervisor waits to restart (not gossiped meanwhile, so that
	// placement gives their units to other members).
	restarts    map[string]int
	restartedAt map[string]time.Time
	down        map[string]bool
	restartT    map[string]clock.Timer // pending supervisor restarts, stopped when the node stops
	self        *actor.PID
}

// restartSource restarts a failed supervisor when its backoff is over.
type restartSource struct {
	source string
	who    *actor.PID
	sup    actor.Supervisor
}

// announced is the result of a SetSources job.
type announced struct{ err error }

func (a *nodeActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.sups, a.byPID = map[string]*actor.PID{}, map[string]string{}
		a.tags, a.restarts, a.restartedAt = map[string]placement.SourceTag{}, map[string]int{}, map[string]time.Time{}
		a.down, a.self, a.restartT = map[string]bool{}, ctx.Self(), map[string]clock.Timer{}
		a.removing = map[string]chan error{}
		for _, s := range a.specs {
			a.tags[s.Name] = placement.SourceTag{ID: placement.SourceID(s.Identity)}
		}
		a.announce(ctx)
		a.sweep(ctx)
	case *swept:
		a.shared.controls.applyRead(m.controls) // before any unit can fetch
		if len(m.left) > 0 {
			ctx.Send(a.shared.leaser, m)
		}
		if a.draining {
			return // told to leave before it started anything
		}
		a.started = true
		for _, s := range a.specs {
			a.spawnSupervisor(ctx, s)
		}
	case *viewChanged:
		ms := a.shared.env.Membership.Members()
		a.shared.env.trace("view", a.shared.env.Node, memberNames(ms))
		for _, pid := range a.supervisors() {
			ctx.Send(pid, &membersChanged{members: ms})
		}
	case *drain:
		if a.draining {
			return
		}
		a.draining = true
		a.pending = map[string]bool{}
		for _, s := range a.specs {
			if a.down[s.Name] || a.sups[s.Name] == nil {
				continue // failed and waiting to restart, or not started: no unit runs
			}
			a.pending[s.Name] = true
			ctx.Send(a.sups[s.Name], &drain{})
		}
		a.checkDrained()
	case *drainedMsg:
		if a.onSourceDrained(ctx, m.source) {
			return
		}
		delete(a.pending, m.source)
		a.checkDrained()
	case *addSource:
		a.addSource(ctx, m)
	case *removeSource:
		a.removeSource(ctx, m)
	case *actor.Terminated:
		a.onTerminated(m.Who)
	case *sourceUnits:
		if t, ok := a.tags[m.source]; ok && t.Units != m.hash {
			t.Units = m.hash
			a.tags[m.source] = t
			a.announce(ctx)
		}
	case *announced:
		a.announcing = false
		if m.err != nil {
			a.shared.env.logger().Warn("announce this node's sources", "error", m.err)
		}
		if a.reannounce {
			a.announce(ctx)
		}
	case *seekUnit:
		a.routeSeek(ctx, m)
	case *crashSource:
		if pid, ok := a.sups[m.source]; ok && !a.down[m.source] {
			ctx.Send(pid, m)
		}
	case *actor.Stopping:
		for _, t := range a.restartT {
			t.Stop()
		}
	case *restartSource:
		delete(a.restartT, m.source)
		if a.draining {
			// its units stopped with it; a node leaving starts nothing
			return
		}
		delete(a.down, m.source)
		a.announce(ctx)
		m.sup.RestartChildren(m.who)
	case *sourceDown:
		a.announce(ctx)
	case *storeBack, *controlsChanged:
		for _, pid := range a.supervisors() {
			ctx.Send(pid, m)
		}
	}
}

// sourceDown re-announces the sources after one went down.
type sourceDown struct{}

// supervisors are the started supervisors, in spec order.
func (a *nodeActor) supervisors() []*actor.PID {
	out := make([]*actor.PID, 0, len(a.sups))
	for _, s := range a.specs {
		if pid := a.sups[s.Name]; pid != nil {
			out = append(out, pid)
		}
	}
	return out
}

// swept is the result of the start-up sweep: the leases of an earlier
// process of this node that are released now; left are those it could not
// take (their row was locked), for the leaser to try again.
type swept struct {
	left     []persistence.Lease
	controls *controlsRead
}

// sweep runs before the supervisors start: leases still recorded under
// this node's name belong to an earlier process of it (killed, or a zombie
// that will find itself fenced), and nobody renews them. Others must not
// wait for their expiry to take them over (this node is alive under that
// name, so takeover by absence does not apply): the sweep releases each
// one with its listed token (which fences the earlier process). Units this node
// wants it acquires again the normal way. A store that does not answer
// does not hold the node up: those leases expire.
func (a *nodeActor) sweep(ctx actor.Context) {
	store, me := a.shared.env.Store, a.shared.env.Node
	self, root := ctx.Self(), ctx.ActorSystem().Root
	log := a.shared.env.logger()
	controls := readControls(a.shared)
	a.shared.env.Executor.Go(exec.WithLabel(a.shared.ctx, "sweep"), func(c context.Context) any {
		cr := &controlsRead{}
		if controls != nil {
			cr = controls(c)
		}
		if cr.err != nil {
			log.Warn("read the controls table at start (units wait, paused, until a renewal round reads it)", "error", cr.err)
		}
		ls, err := store.List(c)
		if err != nil {
			log.Warn("list leases at start (leases of an earlier process of this node will expire instead)", "error", err)
			return &swept{controls: cr}
		}
		var left []persistence.Lease
		n := 0
		for _, l := range ls {
			if l.Owner != me {
				continue
			}
			if !releaseOwn(c, store, l) {
				left = append(left, l)
				continue
			}
			n++
		}
		if n > 0 || len(left) > 0 {
			log.Info("released the leases of an earlier process of this node", "released", n, "locked", len(left))
		}
		return &swept{left: left, controls: cr}
	}, func(v any) { root.Send(self, v) })
}

// releaseOwn releases a lease an earlier process of this node left, with
// the token it was listed with: that fences the earlier process, and
// fails (ErrLeaseLost) when the lease moved on meanwhile — expired, or
// acquired again, by another node or by a unit of this one, whose lease
// is left alone. It reports false, to try again, when the store did not
// answer or the row was locked.
func releaseOwn(c context.Context, store persistence.Leases, l persistence.Lease) bool {
	err := store.Release(c, l)
	return err == nil || errors.Is(err, persistence.ErrLeaseLost)
}

// announce gossips the sources this node runs with the unit sets it
// discovered (Membership.SetSources may wait for its broadcast: it runs as
// a job, one at a time, the newest tags last).
func (a *nodeActor) announce(ctx actor.Context) {
	if a.announcing {
		a.reannounce = true
		return
	}
	a.announcing, a.reannounce = true, false
	tags := make([]placement.SourceTag, 0, len(a.tags))
	for name, t := range a.tags {
		if !a.down[name] {
			tags = append(tags, t)
		}
	}
	sort.Slice(tags, func(i, j int) bool { return tags[i].ID < tags[j].ID })
	m, self, root := a.shared.env.Membership, ctx.Self(), ctx.ActorSystem().Root
	a.shared.env.Executor.Go(exec.WithLabel(a.shared.ctx, "announce"), func(c context.Context) any {
		return &announced{err: m.SetSources(c, tags)}
	}, func(v any) { root.Send(self, v) })
}

func (a *nodeActor) checkDrained() {
	if a.draining && len(a.pending) == 0 {
		a.node.mu.Lock()
		select {
		case <-a.node.drained:
		default:
			close(a.node.drained)
		}
		a.node.mu.Unlock()
		a.shared.env.trace("node-drained", a.shared.env.Node, "")
	}
}

// HandleFailure restarts a failed source supervisor after an exponential
// backoff with full jitter on the injected clock: base·2^(n-1) capped, n
// counting the supervisor's consecutive failures; a supervisor that ran
// HealthyAfter since its last restart starts again from the base.
func (a *nodeActor) HandleFailure(_ *actor.ActorSystem, sup actor.Supervisor, who *actor.PID, _ *actor.RestartStatistics, reason any, _ any) {
	name := a.byPID[who.Id]
	if a.removing[name] != nil {
		// being removed: its units were told to stop; its Terminated ends
		// the removal
		a.shared.env.logger().Error("source supervisor failed while it is removed", "source", name, "reason", fmt.Sprint(reason))
		sup.StopChildren(who)
		return
	}
	if a.draining {
		// leaving: nothing restarts; its units were told to stop
		a.shared.env.logger().Error("source supervisor failed while the node drains", "source", name, "reason", fmt.Sprint(reason))
		sup.StopChildren(who)
		delete(a.pending, name)
		a.checkDrained()
		return
	}
	now := a.shared.env.Clock.Now()
	if at, ok := a.restartedAt[name]; ok && now.Sub(at) >= a.shared.tuning.HealthyAfter {
		a.restarts[name] = 0
	}
	a.restarts[name]++
	n := a.restarts[name]
	d := backoff(a.shared.env.Rand, n, a.shared.tuning.RestartBase, a.shared.tuning.RestartCap)
	a.restartedAt[name] = now.Add(d)
	a.shared.env.logger().Error("source supervisor failed; restarting it after a backoff", "source", name, "failures", n,
		"restart_in", d.Round(time.Millisecond), "reason", fmt.Sprint(reason))
	a.shared.env.trace("source-restart-scheduled", name, fmt.Sprintf("n=%d in=%s", n, d))
	a.shared.reg.source(name, func(st *SourceStatus) { st.State = StateRetrying; st.Error = fmt.Sprint(reason) })
	a.down[name] = true
	root, self := a.shared.system.Root, a.self
	root.Send(self, &sourceDown{})
	if t := a.restartT[name]; t != nil {
		t.Stop()
	}
	a.restartT[name] = a.shared.env.Clock.AfterFunc(d, func() { root.Send(self, &restartSource{source: name, who: who, sup: sup}) })
}

func memberNames(ms []placement.Member) string {
	s := ""
	for i, m := range ms {
		if i > 0 {
			s += ","
		}
		s += m.Name
		if m.State != placement.StateAlive {
			s += "(" + string(m.State) + ")"
		}
	}
	return s
}
