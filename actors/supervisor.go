package actors

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/drover-dev/drover/actors/clock"
	"github.com/drover-dev/drover/actors/quality"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/cluster"
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
	members  []cluster.Member
	children map[string]*child // by unit id
	byPID    map[string]*child // by pid id
	draining bool
	drained  bool

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
	unit      string
	pid       *actor.PID
	restarts  int // consecutive, for the backoff exponent
	restartT  clock.Timer
	waiting   bool // failed, suspended until restartT fires
	stopping  bool
	leaseLost bool
}

// messages
type (
	discoverTick struct{}
	discovered   struct {
		parts    []brokers.Partition
		finished map[string]bool
		err      error
	}
	membersChanged struct{ members []cluster.Member }
	drain          struct{}
	drainedMsg     struct{ source string }
	restartDue     struct {
		unit string
		pid  *actor.PID
	}
	reconcileTick struct{}
	qualityTick   struct{}
	qualityDone   struct {
		w   persistence.QualityWindow
		err error
	}
)

func newSupervisor(ne *nodeEnv, spec *SourceSpec) *supervisor {
	return &supervisor{ne: ne, spec: spec}
}

func (s *supervisor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		s.start(ctx)
	case *discoverTick:
		s.discover(ctx)
	case *discovered:
		s.onDiscovered(ctx, m)
	case *membersChanged:
		s.members = m.members
		s.reconcile(ctx)
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
		s.reconcileAt = nil
		s.reconcile(ctx)
	case *qualitySample:
		s.window.Merge(m.stats)
		if quality.Due(s.window.Rows(), s.wStart, s.ne.env.Clock.Now()) {
			s.closeWindow(ctx)
		}
	case *qualityTick:
		if quality.Due(s.window.Rows(), s.wStart, s.ne.env.Clock.Now()) {
			s.closeWindow(ctx)
		}
		s.qTimer = s.after(ctx, quality.WindowDuration/10, &qualityTick{})
	case *qualityDone:
		if m.err != nil {
			s.ne.env.logger().Warn("write quality window", "source", s.spec.Name, "error", m.err)
		}
	case *actor.Stopping:
		s.cancel()
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
}

func (s *supervisor) start(ctx actor.Context) {
	s.self = ctx.Self()
	s.sup, _ = ctx.(actor.Supervisor)
	s.jobs, s.cancel = context.WithCancel(s.ne.ctx)
	s.units = map[string]brokers.Partition{}
	s.finished = map[string]bool{}
	s.children = map[string]*child{}
	s.byPID = map[string]*child{}
	s.window = quality.New(s.spec.schema)
	s.wStart = s.ne.env.Clock.Now()
	s.qTimer = s.after(ctx, quality.WindowDuration/10, &qualityTick{})
	s.ne.reg.source(s.spec.Name, func(st *SourceStatus) { st.State = StateRunning })
	s.members = s.ne.env.Membership.Members()
	s.discover(ctx)
}

func (s *supervisor) after(ctx actor.Context, d time.Duration, msg any) clock.Timer {
	self, root := ctx.Self(), ctx.ActorSystem().Root
	return s.ne.env.Clock.AfterFunc(d, func() { root.Send(self, msg) })
}

// discover lists the units (streams: partitions and which are finished;
// queues: the configured slots) and schedules the next listing.
func (s *supervisor) discover(ctx actor.Context) {
	if s.discovery != nil {
		s.discovery.Stop()
	}
	s.discovery = s.after(ctx, s.spec.Discovery, &discoverTick{})
	if s.spec.isQueue() {
		parts := make([]brokers.Partition, s.spec.Slots)
		for i := range parts {
			parts[i] = brokers.Partition{ID: "slot-" + strconv.Itoa(i)}
		}
		s.onDiscovered(ctx, &discovered{parts: parts})
		return
	}
	stream, store, name := s.spec.Stream, s.ne.env.Store, s.spec.Name
	self, root := ctx.Self(), ctx.ActorSystem().Root
	s.ne.env.Executor.Go(s.jobs, func(c context.Context) any {
		parts, err := stream.Partitions(c)
		if err != nil {
			return &discovered{err: fmt.Errorf("list partitions: %w", err)}
		}
		fin := map[string]bool{}
		cps, err := store.Checkpoints(c, name)
		if err != nil {
			return &discovered{err: fmt.Errorf("read checkpoints: %w", err)}
		}
		for _, cp := range cps {
			if cp.Finished {
				fin[cp.Unit] = true
			}
		}
		return &discovered{parts: parts, finished: fin}
	}, func(v any) { root.Send(self, v) })
}

func (s *supervisor) onDiscovered(ctx actor.Context, m *discovered) {
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
		s.discovery = s.after(ctx, d, &discoverTick{})
		return
	}
	state := StateRunning
	if s.draining {
		state = StateStopping
	}
	s.ne.reg.source(s.spec.Name, func(st *SourceStatus) { st.Error = ""; st.State = state })
	units := make(map[string]brokers.Partition, len(m.parts))
	for _, p := range m.parts {
		units[s.spec.Name+"/"+p.ID] = p
	}
	if len(units) != len(s.units) {
		s.ne.env.trace("discovered", s.spec.Name, strconv.Itoa(len(units)))
	}
	s.units = units
	for u := range m.finished {
		s.finished[u] = true
	}
	s.reconcile(ctx)
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
		for _, u := range cluster.Owned(s.ne.env.Node, eligible, s.members) {
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
	for _, u := range sortedKeys(want) {
		if _, ok := s.children[u]; ok {
			continue
		}
		s.spawn(ctx, u)
	}
}

func (s *supervisor) spawn(ctx actor.Context, unit string) {
	p := s.units[unit]
	ne, spec := s.ne, s.spec
	props := actor.PropsFromProducer(func() actor.Actor { return newUnit(ne, spec, p) }, ne.props()...)
	pid := ctx.SpawnPrefix(props, p.ID)
	c := &child{unit: unit, pid: pid}
	s.children[unit] = c
	s.byPID[pid.Id] = c
	s.ne.reg.unit(s.spec.Name, unit, func(st *UnitStatus) { st.State = StateStarting })
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
	s.ne.reg.removeUnit(s.spec.Name, c.unit)
	s.ne.metrics.Forget(s.spec.Name, c.unit)
	s.ne.env.trace("unit-stopped", c.unit, "")
	if s.checkDrained(ctx) {
		return
	}
	if c.leaseLost {
		// someone else owns it now; let placement settle before trying again
		if s.reconcileAt == nil {
			d := s.ne.tuning.LeaseLostPause + s.ne.env.Rand.Jitter(s.ne.tuning.LeaseLostPause/2)
			s.reconcileAt = s.after(ctx, d, &reconcileTick{})
		}
		return
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
	switch m.kind {
	case evLeaseLost:
		c.leaseLost = true
	case evFinished:
		s.finished[m.unit] = true
		// children of this unit may now be placed; discovery will list them
		// (a reshard is noticed at the next listing, or now)
		s.discover(ctx)
	case evHealthy:
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
	d := backoff(s.ne.env.Rand, c.restarts, s.ne.tuning.RestartBase, s.ne.tuning.RestartCap)
	next := s.ne.env.Clock.Now().Add(d)
	msg := fmt.Sprint(reason)
	if f, ok := reason.(*unitFailure); ok {
		msg = f.err.Error()
	} else {
		s.ne.env.logger().Error("unit actor panicked", "unit", c.unit, "panic", msg)
	}
	s.ne.env.trace("restart-scheduled", c.unit, fmt.Sprintf("n=%d in=%s", c.restarts, d))
	s.ne.reg.unit(s.spec.Name, c.unit, func(st *UnitStatus) {
		st.State = StateRetrying
		st.LastError = msg
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
	s.ne.reg.unit(s.spec.Name, c.unit, func(st *UnitStatus) { st.Restarts++ })
	s.ne.metrics.Restarted(s.spec.Name, c.unit)
	s.sup.RestartChildren(c.pid)
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
