package actors

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/drover-dev/drover/actors/placement"
	"github.com/drover-dev/drover/actors/quality"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/internal/clock"
	"github.com/drover-dev/drover/internal/exec"
	"github.com/drover-dev/drover/internal/mutate"
	"github.com/drover-dev/drover/persistence"
)

// supervisor is the actor of one source: it discovers the source's units,
// runs a child for each unit placement gives this node, stops children
// placement takes away, restarts failed children after an exponential
// backoff with full jitter on the injected clock, and closes quality
// windows.
//
// It implements actor.SupervisorStrategy itself, so protoactor calls
// HandleFailure on this actor's goroutine.
type supervisor struct {
	ne   *nodeEnv
	spec *SourceSpec
	self *actor.PID
	sup  actor.Supervisor // this actor's context, for RestartChildren

	units    map[string]brokers.Partition // discovered, by unit id
	finished map[string]bool              // units read to their end
	stale    map[string]bool              // units whose finished checkpoint is of an earlier stream
	cooldown map[string]time.Time         // units that lost their lease: not started again before
	// initial are the source's units at its first discovery, recorded in
	// the store (persistence.Sources); nil until known. A unit not among
	// them appeared later and starts at its earliest.
	initial map[string]bool
	members []placement.Member
	id      uint32 // placement.SourceID of the spec's identity
	// Discoveries may overlap (ticks, a finished unit, gossip): each has a
	// number; a result older than one already applied is dropped, and a
	// listing started before a unit finished does not count against it.
	discSeq     uint64            // discoveries started
	discApplied uint64            // the newest discovery applied
	finishedAt  map[string]uint64 // unit -> discSeq when it finished here
	hash        uint32            // placement.UnitsHash of what this node discovered; 0 before
	lastDisc    time.Time
	discoveryAt time.Time         // when the discovery timer fires
	children    map[string]*child // by unit id
	byPID       map[string]*child // by pid id
	draining    bool
	drained     bool
	ended       atomic.Bool // stopped or restarting: timers and results are stale

	jobs        context.Context
	cancel      context.CancelFunc
	discovery   clock.Timer
	reconcileAt clock.Timer

	window  *quality.Stats
	wStart  time.Time
	prevWin *persistence.QualityWindow
	qTimer  clock.Timer
}

type child struct {
	unit     string
	pid      *actor.PID
	gen      uint64 // of its entry in the tree (registry.addUnit)
	restarts int    // consecutive, for the backoff exponent
	restartT clock.Timer
	waiting  bool // failed, suspended until restartT fires
	stopping bool
	failed   atomic.Bool // it failed at least once (read by its next incarnation)
	// exit is why the unit stopped itself (exitLeaseLost, exitFinished),
	// set by the unit before it stops: its Terminated may reach the
	// supervisor before any message the unit sent last (protoactor handles
	// system messages first), so the reason travels with the child.
	exit atomic.Int32
}

// Why a unit stopped itself.
const (
	exitLeaseLost int32 = iota + 1
	exitFinished
)

// messages
type (
	// Ticks name the instance that scheduled them: a tick already in the
	// mailbox when its supervisor restarted reaches the new instance, which
	// must not start a second chain of them.
	discoverTick struct{ from *supervisor }
	discovered   struct {
		seq      uint64
		parts    []brokers.Partition
		finished map[string]bool
		initial  []string // nil unless asked for
		err      error
	}
	// sourceUnits tells the node actor what this source's units are now.
	sourceUnits struct {
		source string
		hash   uint32
	}
	// crashSource makes a supervisor fail (fault injection).
	crashSource    struct{ source string }
	membersChanged struct{ members []placement.Member }
	drain          struct{}
	drainedMsg     struct{ source string }
	restartDue     struct {
		unit string
		pid  *actor.PID
	}
	reconcileTick struct{ from *supervisor }
	qualityTick   struct{ from *supervisor }
	qualityDone   struct {
		w   persistence.QualityWindow
		err error
	}
)

func newSupervisor(ne *nodeEnv, spec *SourceSpec) *supervisor {
	return &supervisor{ne: ne, spec: spec, id: placement.SourceID(spec.Identity)}
}

func (s *supervisor) Receive(ctx actor.Context) {
	if s.ended.Load() {
		// Stopping, restarting, or failed and waiting to restart: protoactor
		// still hands this instance system messages — its children's
		// Terminated among them — and starting children again now would
		// keep a restart from ever completing (it waits for them).
		if _, ok := ctx.Message().(*actor.Restarting); ok {
			s.forgetUnits()
		}
		return
	}
	defer func() {
		if r := recover(); r != nil {
			// failed: its mailbox is suspended until its node restarts it;
			// leave nothing of this instance running meanwhile — its units
			// hand their leases over now (its node stopped gossiping the
			// source, so others take them) instead of running on unsupervised
			if !mutate.On(mutate.SupervisorLeak) { // the bug of issue 9 item 11
				s.end()
				for _, u := range sortedKeys(s.children) {
					ctx.Send(s.children[u].pid, &stopUnit{})
				}
			}
			panic(r)
		}
	}()
	switch m := ctx.Message().(type) {
	case *actor.Started:
		s.start(ctx)
	case *discoverTick:
		if m.from != s {
			return
		}
		s.discover(ctx)
	case *discovered:
		s.onDiscovered(ctx, m)
	case *membersChanged:
		s.members = m.members
		s.reconcile(ctx)
		s.compareUnits(ctx)
	case *crashSource:
		panic(fmt.Sprintf("source %s: crash injected", s.spec.Name))
	case *storeBack:
		s.restartWaiting(ctx)
	case *drain:
		s.draining = true
		s.ne.reg.source(s.spec.Name, func(st *SourceStatus) { st.State = StateStopping })
		s.reconcile(ctx)
		s.checkDrained(ctx)
	case *actor.Terminated:
		s.onTerminated(ctx, m.Who)
	case *unitEvent:
		s.onUnitEvent(ctx, m)
	case *restartDue:
		s.onRestartDue(ctx, m)
	case *reconcileTick:
		if m.from != s {
			return
		}
		s.reconcileAt = nil
		s.reconcile(ctx)
	case *qualitySample:
		s.window.Merge(m.stats)
		if quality.Due(s.window.Rows(), s.wStart, s.ne.env.Clock.Now()) {
			s.closeWindow(ctx)
		}
	case *qualityTick:
		if m.from != s {
			return
		}
		if quality.Due(s.window.Rows(), s.wStart, s.ne.env.Clock.Now()) {
			s.closeWindow(ctx)
		}
		s.qTimer = s.after(ctx, quality.WindowDuration/10, &qualityTick{from: s})
	case *qualityDone:
		if m.err != nil {
			s.ne.env.logger().Warn("write quality window", "source", s.spec.Name, "error", m.err)
		}
	case *actor.Stopping:
		s.end()
	case *actor.Restarting:
		// the children stop and a new instance starts: leave nothing of
		// this one running
		if mutate.On(mutate.SupervisorLeak) {
			return // the bug of issue 9 item 11
		}
		s.end()
		s.forgetUnits()
	}
}

// forgetUnits drops this instance's units from the tree and the metrics:
// a restart stops them, and the next instance starts its own. The units
// may write their status while they stop: the tree drops those writes
// (registry.unit), the entries are gone for good.
func (s *supervisor) forgetUnits() {
	for u, c := range s.children {
		s.ne.reg.removeUnit(s.spec.Name, u, c.gen)
		s.ne.metrics.Forget(s.spec.Name, u)
	}
}

// end cancels the jobs and stops the timers of this instance (stop or
// restart): results and ticks that arrive later are dropped.
func (s *supervisor) end() {
	if s.cancel == nil {
		return
	}
	s.cancel()
	s.ended.Store(true)
	for _, t := range []clock.Timer{s.discovery, s.reconcileAt, s.qTimer} {
		if t != nil {
			t.Stop()
		}
	}
	for _, c := range s.children {
		if c.restartT != nil {
			c.restartT.Stop()
		}
	}
}

func (s *supervisor) start(ctx actor.Context) {
	s.self = ctx.Self()
	s.sup, _ = ctx.(actor.Supervisor)
	s.jobs, s.cancel = context.WithCancel(s.ne.ctx)
	s.units = map[string]brokers.Partition{}
	s.finished = map[string]bool{}
	s.stale = map[string]bool{}
	s.cooldown = map[string]time.Time{}
	s.finishedAt = map[string]uint64{}
	s.children = map[string]*child{}
	s.byPID = map[string]*child{}
	s.window = quality.New(s.spec.schema)
	s.wStart = s.ne.env.Clock.Now()
	s.qTimer = s.after(ctx, quality.WindowDuration/10, &qualityTick{from: s})
	s.ne.reg.source(s.spec.Name, func(st *SourceStatus) { st.State = StateRunning })
	s.members = s.ne.env.Membership.Members()
	s.discover(ctx)
}

func (s *supervisor) after(ctx actor.Context, d time.Duration, msg any) clock.Timer {
	self, root := ctx.Self(), ctx.ActorSystem().Root
	label := "supervisor"
	switch msg.(type) {
	case *qualityTick:
		label = "quality"
	case *discoverTick:
		label = "discover"
	}
	return clock.AfterFunc(s.ne.env.Clock, d, label, func() {
		if !s.ended.Load() {
			root.Send(self, msg)
		}
	})
}

// discover lists the units (streams: partitions and which are finished;
// queues: the configured slots) and schedules the next listing.
func (s *supervisor) discover(ctx actor.Context) {
	if s.discovery != nil {
		s.discovery.Stop()
	}
	s.discovery = s.after(ctx, s.spec.Discovery, &discoverTick{from: s})
	s.discoveryAt = s.ne.env.Clock.Now().Add(s.spec.Discovery)
	s.lastDisc = s.ne.env.Clock.Now()
	s.discSeq++
	seq := s.discSeq
	if s.spec.isQueue() {
		parts := make([]brokers.Partition, s.spec.Slots)
		for i := range parts {
			parts[i] = brokers.Partition{ID: "slot-" + strconv.Itoa(i)}
		}
		s.onDiscovered(ctx, &discovered{seq: seq, parts: parts})
		return
	}
	stream, store, name := s.spec.Stream, s.ne.env.Store, s.spec.Name
	needInitial := s.initial == nil
	self, root, jobs := ctx.Self(), ctx.ActorSystem().Root, s.jobs
	s.ne.env.Executor.Go(exec.WithLabel(jobs, "discover"), func(c context.Context) any {
		parts, err := stream.Partitions(c)
		if err != nil {
			return &discovered{seq: seq, err: fmt.Errorf("list partitions: %w", err)}
		}
		fin := map[string]bool{}
		cps, err := store.Checkpoints(c, name)
		if err != nil {
			return &discovered{seq: seq, err: fmt.Errorf("read checkpoints: %w", err)}
		}
		for _, cp := range cps {
			if cp.Finished {
				fin[cp.Unit] = true
			}
		}
		d := &discovered{seq: seq, parts: parts, finished: fin}
		if needInitial {
			ids := make([]string, len(parts))
			for i, p := range parts {
				ids[i] = name + "/" + p.ID
			}
			if d.initial, err = store.InitSource(c, name, ids); err != nil {
				return &discovered{seq: seq, err: fmt.Errorf("record the initial units: %w", err)}
			}
		}
		return d
	}, func(v any) {
		if jobs.Err() == nil {
			root.Send(self, v)
		}
	})
}

func (s *supervisor) onDiscovered(ctx actor.Context, m *discovered) {
	if m.seq < s.discApplied {
		s.ne.env.trace("discovery-dropped", s.spec.Name, fmt.Sprintf("seq=%d applied=%d", m.seq, s.discApplied))
		return // older than a listing already applied
	}
	s.discApplied = m.seq
	if m.err != nil {
		msg := m.err.Error()
		s.ne.reg.source(s.spec.Name, func(st *SourceStatus) { st.Error = msg; st.State = StateRetrying })
		s.ne.env.trace("discovery-failed", s.spec.Name, msg)
		// try again sooner than the regular interval
		if s.discovery != nil {
			s.discovery.Stop()
		}
		d := s.ne.tuning.RestartBase + s.ne.env.Rand.Jitter(s.ne.tuning.RestartBase)
		if d > s.spec.Discovery {
			d = s.spec.Discovery
		}
		s.discovery = s.after(ctx, d, &discoverTick{from: s})
		s.discoveryAt = s.ne.env.Clock.Now().Add(d)
		return
	}
	state := StateRunning
	if s.draining {
		state = StateStopping
	}
	s.ne.reg.source(s.spec.Name, func(st *SourceStatus) { st.Error = ""; st.State = state })
	if m.initial != nil && s.initial == nil {
		s.initial = make(map[string]bool, len(m.initial))
		for _, u := range m.initial {
			s.initial[u] = true
		}
	}
	listed := make(map[string]bool, len(m.parts))
	for _, p := range m.parts {
		listed[p.ID] = true
	}
	units := make(map[string]brokers.Partition, len(m.parts))
	for _, p := range m.parts {
		// A parent the stream no longer lists (aged past retention) counts
		// as finished: nothing of it can be read any more.
		var parents []string
		for _, par := range p.Parents {
			if listed[par] || mutate.On(mutate.WaitForUnlistedParents) {
				parents = append(parents, par)
			}
		}
		p.Parents = parents
		u := s.spec.Name + "/" + p.ID
		if c, ok := s.children[u]; ok && len(parents) < len(s.units[u].Parents) {
			ctx.Send(c.pid, &parentsListed{parents: parents})
		}
		units[u] = p
	}
	if len(units) != len(s.units) {
		s.ne.env.trace("discovered", s.spec.Name, strconv.Itoa(len(units)))
	}
	s.units = units
	for u := range m.finished {
		s.finished[u] = true
	}
	// A unit is finished because it was closed by a reshard, so its
	// children are listed as long as it is. A finished unit listed with no
	// child listed is a partition of a stream created again with the same
	// ids: its checkpoint is of the old stream, and it is read again (its
	// open resets the checkpoint).
	children := map[string]bool{}
	for _, p := range m.parts {
		for _, par := range p.Parents {
			children[s.spec.Name+"/"+par] = true
		}
	}
	for _, u := range sortedKeys(s.finished) {
		if m.seq <= s.finishedAt[u] {
			continue // listed before the unit finished here: its children may be missing
		}
		if _, listed := units[u]; listed && !children[u] && !s.spec.isQueue() {
			delete(s.finished, u)
			s.stale[u] = true
			s.ne.env.trace("finished-stale", u, "")
		}
	}
	s.announceUnits(ctx)
	s.reconcile(ctx)
}

// announceUnits tells the node actor (and through gossip the others) which
// units this node discovered, so that a member that sees other units
// discovers again (unit sets converge after a reshard).
func (s *supervisor) announceUnits(ctx actor.Context) {
	ids := make([]string, 0, len(s.units))
	for u := range s.units {
		if s.finished[u] {
			ids = append(ids, u+"#finished")
		} else {
			ids = append(ids, u)
		}
	}
	h := placement.UnitsHash(ids)
	if h != s.hash {
		s.hash = h
		ctx.Send(ctx.Parent(), &sourceUnits{source: s.spec.Name, hash: h})
	}
}

// compareUnits discovers again when a member that runs this source says
// it discovered other units than this node did (at most every
// DiscoverySpacing).
func (s *supervisor) compareUnits(ctx actor.Context) {
	if s.hash == 0 || s.spec.isQueue() {
		return
	}
	for _, m := range s.members {
		tag, runs, known := m.Source(s.id, s.ne.digest)
		if !runs || !known || tag.Units == 0 || tag.Units == s.hash || m.Name == s.ne.env.Node {
			continue
		}
		if s.ne.env.Clock.Now().Sub(s.lastDisc) >= s.ne.tuning.DiscoverySpacing {
			s.ne.env.trace("discover-triggered", s.spec.Name, m.Name)
			s.discover(ctx)
		} else if at := s.lastDisc.Add(s.ne.tuning.DiscoverySpacing); s.discovery != nil && at.Before(s.discoveryAt) {
			// as soon as the spacing allows (never later than planned)
			s.discovery.Stop()
			s.discovery = s.after(ctx, at.Sub(s.ne.env.Clock.Now()), &discoverTick{from: s})
			s.discoveryAt = at
		}
		return
	}
}

// eligible are the members placement may give this source's units to:
// those that run the source (gossiped source tags).
func (s *supervisor) eligible() []placement.Member {
	if mutate.On(mutate.PlaceIgnoringSources) {
		return s.members // the bug of issue 9 item 12
	}
	out := make([]placement.Member, 0, len(s.members))
	for _, m := range s.members {
		if _, runs, _ := m.Source(s.id, s.ne.digest); runs || m.Name == s.ne.env.Node {
			out = append(out, m)
		}
	}
	return out
}

// reconcile starts children for the units this node should own and stops
// the ones it should not.
func (s *supervisor) reconcile(ctx actor.Context) {
	want := map[string]bool{}
	if !s.draining {
		eligible := make([]string, 0, len(s.units))
		for u := range s.units {
			if !s.finished[u] {
				eligible = append(eligible, u)
			}
		}
		sort.Strings(eligible)
		// The clamp of the whole view, not of the eligible members: the
		// same on every node that sees the same view.
		limit := placement.EffectiveMaxCapacity(s.members, s.ne.env.MaxCapacity)
		for _, u := range placement.Owned(s.ne.env.Node, eligible, s.eligible(), limit) {
			want[u] = true
		}
	}
	// stop what we should not own, in unit order (determinism)
	for _, u := range sortedKeys(s.children) {
		c := s.children[u]
		if want[u] || c.stopping {
			continue
		}
		c.stopping = true
		if c.waiting {
			// suspended after a failure: nothing in flight, stop it now
			if c.restartT != nil {
				c.restartT.Stop()
			}
			ctx.Stop(c.pid)
			continue
		}
		ctx.Send(c.pid, &stopUnit{})
	}
	// start what we should own
	now := s.ne.env.Clock.Now()
	for _, u := range sortedKeys(want) {
		if _, ok := s.children[u]; ok {
			continue
		}
		if until, ok := s.cooldown[u]; ok {
			if now.Before(until) {
				if s.reconcileAt == nil {
					s.reconcileAt = s.after(ctx, until.Sub(now), &reconcileTick{from: s})
				}
				continue // it lost its lease a moment ago
			}
			delete(s.cooldown, u)
		}
		s.spawn(ctx, u)
	}
}

func (s *supervisor) spawn(ctx actor.Context, unit string) {
	p := s.units[unit]
	ne, spec := s.ne, s.spec
	initial := s.initial[unit] || spec.isQueue()
	stale := s.stale[unit]
	// the entry first: the child may write its status before spawn returns
	c := &child{unit: unit, gen: s.ne.reg.addUnit(s.spec.Name, unit)}
	props := actor.PropsFromProducer(func() actor.Actor {
		u := newUnit(ne, spec, p, initial)
		u.gen = c.gen
		u.staleFinish = stale
		u.exit = &c.exit
		// restarted after it failed: its first success is a recovery
		u.recovering = c.failed.Load()
		return u
	}, ne.props()...)
	pid := ctx.SpawnPrefix(props, p.ID)
	c.pid = pid
	s.children[unit] = c
	s.byPID[pid.Id] = c
}

func (s *supervisor) onTerminated(ctx actor.Context, pid *actor.PID) {
	c, ok := s.byPID[pid.Id]
	if !ok {
		return
	}
	delete(s.byPID, pid.Id)
	delete(s.children, c.unit)
	if c.restartT != nil {
		c.restartT.Stop()
	}
	s.ne.reg.removeUnit(s.spec.Name, c.unit, c.gen)
	s.ne.metrics.Forget(s.spec.Name, c.unit)
	s.ne.env.trace("unit-stopped", c.unit, "")
	exit := c.exit.Load()
	if exit == exitFinished {
		s.finished[c.unit] = true
		s.finishedAt[c.unit] = s.discSeq
		delete(s.stale, c.unit)
	}
	if s.checkDrained(ctx) {
		return
	}
	switch exit {
	case exitFinished:
		// its children may now be placed: list them now rather than at the
		// next discovery (a reshard is noticed at the next listing, or now)
		s.discover(ctx)
		return
	case exitLeaseLost:
		// someone else owns it now; let placement settle before trying
		// again: no reconcile starts it before the pause is over
		d := s.ne.tuning.LeaseLostPause + s.ne.env.Rand.Jitter(s.ne.tuning.LeaseLostPause/2)
		s.cooldown[c.unit] = s.ne.env.Clock.Now().Add(d)
		if s.reconcileAt == nil {
			s.reconcileAt = s.after(ctx, d, &reconcileTick{from: s})
		}
	}
	s.reconcile(ctx)
}

func (s *supervisor) checkDrained(ctx actor.Context) bool {
	if s.draining && len(s.children) == 0 {
		if !s.drained {
			s.drained = true
			s.ne.env.trace("drained", s.spec.Name, "")
			ctx.Send(ctx.Parent(), &drainedMsg{source: s.spec.Name})
		}
		return true
	}
	return false
}

func (s *supervisor) onUnitEvent(ctx actor.Context, m *unitEvent) {
	c, ok := s.byPID[m.pid.Id]
	if !ok {
		return
	}
	if m.kind == evHealthy {
		c.restarts = 0
	}
}

// HandleFailure is drover's supervisor strategy: restart the failed child
// after base·2^(n-1) capped, with full jitter from the node's seeded source,
// on the injected clock. protoactor's own strategies read the wall clock.
func (s *supervisor) HandleFailure(_ *actor.ActorSystem, sup actor.Supervisor, who *actor.PID, _ *actor.RestartStatistics, reason any, _ any) {
	c, ok := s.byPID[who.Id]
	if !ok {
		sup.StopChildren(who)
		return
	}
	c.restarts++
	c.failed.Store(true)
	d := backoff(s.ne.env.Rand, c.restarts, s.ne.tuning.RestartBase, s.ne.tuning.RestartCap)
	if f, ok := reason.(*unitFailure); ok && errors.Is(f.err, brokers.ErrUnknownPartition) {
		// the partition may be gone (a recreated topic, a forgotten
		// shard): list them again rather than wait for the next discovery
		root, self := s.ne.root(), s.self
		root.Send(self, &discoverTick{from: s})
	}
	next := s.ne.env.Clock.Now().Add(d)
	msg := fmt.Sprint(reason)
	if f, ok := reason.(*unitFailure); ok {
		msg = f.err.Error()
	} else {
		s.ne.env.logger().Error("unit actor panicked", "unit", c.unit, "panic", msg)
	}
	s.ne.env.trace("restart-scheduled", c.unit, fmt.Sprintf("n=%d in=%s", c.restarts, d))
	now := s.ne.env.Clock.Now()
	s.ne.reg.unit(s.spec.Name, c.unit, c.gen, func(st *UnitStatus) {
		st.State = StateRetrying
		st.setError(msg, now)
		st.NextRetryAt = timePtr(next)
	})
	c.waiting = true
	if c.stopping || s.draining {
		sup.StopChildren(who)
		return
	}
	self, root, unit := s.self, s.ne.root(), c.unit
	c.restartT = s.ne.env.Clock.AfterFunc(d, func() { root.Send(self, &restartDue{unit: unit, pid: who}) })
}

// restartWaiting restarts, soon, the children waiting out a restart
// backoff: the store answers again, and a unit that failed on its outage
// need not wait up to RestartCap more (each within a second, with jitter,
// so that a node's units do not all start in the same instant).
func (s *supervisor) restartWaiting(ctx actor.Context) {
	for _, u := range sortedKeys(s.children) {
		c := s.children[u]
		if !c.waiting || c.stopping || c.restartT == nil {
			continue
		}
		c.restartT.Stop()
		d := s.ne.env.Rand.Jitter(time.Second)
		self, root, unit, pid := s.self, s.ne.root(), c.unit, c.pid
		c.restartT = s.ne.env.Clock.AfterFunc(d, func() { root.Send(self, &restartDue{unit: unit, pid: pid}) })
		s.ne.env.trace("restart-sooner", c.unit, d.String())
	}
}

func (s *supervisor) onRestartDue(ctx actor.Context, m *restartDue) {
	c, ok := s.children[m.unit]
	if !ok || c.pid.Id != m.pid.Id || !c.waiting {
		return
	}
	c.waiting = false
	c.restartT = nil
	if c.stopping || s.draining {
		ctx.Stop(c.pid)
		return
	}
	s.ne.env.trace("restarted", c.unit, strconv.Itoa(c.restarts))
	s.ne.reg.unit(s.spec.Name, c.unit, c.gen, func(st *UnitStatus) { st.Restarts++ })
	s.ne.metrics.Restarted(s.spec.Name, c.unit)
	s.sup.RestartChildren(c.pid)
	// the new incarnation starts with the parents it was spawned with:
	// tell it those listed now
	if p, ok := s.units[c.unit]; ok && !s.spec.isQueue() {
		ctx.Send(c.pid, &parentsListed{parents: p.Parents})
	}
}

// closeWindow writes the current quality window and starts the next.
func (s *supervisor) closeWindow(ctx actor.Context) {
	now := s.ne.env.Clock.Now()
	w := s.window.Close(s.spec.Name, s.ne.env.Node, s.wStart, now, s.prevWin)
	s.prevWin = &w
	s.window.Reset()
	s.wStart = now
	s.ne.reg.setQuality(s.spec.Name, w)
	s.ne.env.trace("quality", s.spec.Name, fmt.Sprintf("rows=%d failed=%d status=%s", w.RowsRead, w.RowsFailed, w.Status))
	store, self, root := s.ne.env.Store, ctx.Self(), ctx.ActorSystem().Root
	s.ne.env.Executor.Go(s.jobs, func(c context.Context) any {
		_, err := store.WriteQuality(c, w)
		return &qualityDone{w: w, err: err}
	}, func(v any) { root.Send(self, v) })
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
