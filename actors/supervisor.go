package actors

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/drover-dev/drover/actors/placement"
	"github.com/drover-dev/drover/actors/quality"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/internal/clock"
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
	node *nodeEnv
	spec *SourceSpec
	self *actor.PID
	sup  actor.Supervisor // this actor's context, for RestartChildren

	units map[string]struct{} // discovered, by unit id
	// parents are the listed parents of the discovered units that have
	// any (a split's or merge's children), by unit id: kept apart from
	// units, which so holds no value (a brokers.Partition per unit was 50
	// bytes of map per idle unit, issue 12 item 5).
	parents  map[string][]string
	finished map[string]bool      // units read to their end
	stale    map[string]bool      // units whose finished checkpoint is of an earlier stream
	cooldown map[string]time.Time // units that lost their lease: not started again before
	// eligibleSorted caches the units placement is asked about (listed,
	// not finished), sorted; nil when units or finished changed since
	// (unitsChanged). A reconcile runs at every child's end: sorting
	// thousands of ids each time was most of a large simulation's time.
	eligibleSorted []string
	// initial are the source's units at its first discovery, recorded in
	// the store (persistence.Sources); nil until known. A unit not among
	// them appeared later and starts at its earliest.
	// Sorted (a slice, not a map: 16 bytes a unit instead of about 50).
	initial []string
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
	pidPeak     int               // byPID's most entries since it was last compacted
	// queued are the units the last reconcile wants started but found no
	// start slot for (startgate.go), in unit order; started as slots free.
	queued     []string
	draining   bool
	drained    bool
	ended      atomic.Bool // stopped or restarting: timers and results are stale
	restarting bool        // ended to restart (failed), not to stop

	sweepT  clock.Timer // the passive units' safety sweep (supervisor_passive.go)
	sweepAt time.Time

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
	// handoff is where the unit leaves its record when it passivates
	// (exitPassive); passive holds it while the unit has no actor (pid
	// nil).
	handoff passiveHandoff
	passive *passiveUnit
	// slot: the unit holds one of the node's start slots (startgate.go).
	slot startSlot
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

func newSupervisor(node *nodeEnv, spec *SourceSpec) *supervisor {
	return &supervisor{node: node, spec: spec, id: placement.SourceID(spec.Identity)}
}

func (s *supervisor) Receive(ctx actor.Context) {
	if s.ended.Load() {
		// Stopping, restarting, or failed and waiting to restart: protoactor
		// still hands this instance system messages — its children's
		// Terminated among them — and starting children again now would
		// keep a restart from ever completing (it waits for them).
		switch m := ctx.Message().(type) {
		case *actor.Restarting:
			s.forgetUnits()
		case *actor.Terminated:
			s.dropHandoff(m.Who, !s.restarting)
		case *seekUnit:
			m.refuse(fmt.Errorf("seek %s: %w: source %s is restarting or stopping on node %s", m.Unit, ErrSeekConflict, s.spec.Name, s.node.env.Node))
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
				s.restarting = true
				s.end()
				for _, u := range slices.Sorted(maps.Keys(s.children)) {
					s.tell(ctx, s.children[u], &stopUnit{})
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
	case *controlsChanged:
		s.onControls(ctx, m)
	case *drain:
		s.draining = true
		s.node.reg.source(s.spec.Name, func(st *SourceStatus) { st.State = StateStopping })
		s.reconcile(ctx)
		s.checkDrained(ctx)
	case *actor.Terminated:
		s.onTerminated(ctx, m.Who)
	case *unitEvent:
		s.onUnitEvent(ctx, m)
	case *passiveWoken:
		s.onPassiveWoken(ctx, m)
	case *passiveSweep:
		if m.from == s {
			s.sweep(ctx)
		}
	case *leaseLostNote:
		s.onLeaseLost(ctx, m)
	case *seekUnit:
		s.onSeek(ctx, m)
	case *restartDue:
		s.onRestartDue(ctx, m)
	case *startSlotsFree:
		s.startQueued(ctx)
	case *reconcileTick:
		if m.from != s {
			return
		}
		s.reconcileAt = nil
		s.reconcile(ctx)
	case *qualitySample:
		s.window.Merge(m.stats)
		if quality.Due(s.window.Rows(), s.wStart, s.node.env.Clock.Now()) {
			s.closeWindow(ctx)
		}
	case *qualityTick:
		if m.from != s {
			return
		}
		if quality.Due(s.window.Rows(), s.wStart, s.node.env.Clock.Now()) {
			s.closeWindow(ctx)
		}
		s.qTimer = s.after(ctx, quality.WindowDuration/10, &qualityTick{from: s})
	case *qualityDone:
		if m.err != nil {
			s.node.env.logger().Warn("write quality window", "source", s.spec.Name, "error", m.err)
		}
	case *actor.Stopping:
		s.end()
	case *actor.Restarting:
		// the children stop and a new instance starts: leave nothing of
		// this one running
		if mutate.On(mutate.SupervisorLeak) {
			return // the bug of issue 9 item 11
		}
		s.restarting = true
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
		s.node.reg.removeUnit(s.spec.Name, u, c.gen)
		s.node.metrics.Forget(s.spec.Name, u)
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
	s.queued = nil
	s.node.starts.wait(s.self, 0) // none of its units waits to start now
	s.dropPassive(!s.restarting)
	for _, t := range []clock.Timer{s.discovery, s.reconcileAt, s.qTimer, s.sweepT} {
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
	s.jobs, s.cancel = context.WithCancel(s.node.ctx)
	s.units, s.parents = map[string]struct{}{}, nil
	s.finished = map[string]bool{}
	s.unitsChanged()
	s.stale = map[string]bool{}
	s.cooldown = map[string]time.Time{}
	s.finishedAt = map[string]uint64{}
	s.children = map[string]*child{}
	s.byPID, s.pidPeak = map[string]*child{}, 0
	s.window = quality.New(s.spec.schema)
	s.wStart = s.node.env.Clock.Now()
	s.qTimer = s.after(ctx, quality.WindowDuration/10, &qualityTick{from: s})
	s.node.reg.source(s.spec.Name, func(st *SourceStatus) { st.State = StateRunning })
	s.members = s.node.env.Membership.Members()
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
	case *passiveSweep:
		label = "passive-sweep"
	}
	return clock.AfterFunc(s.node.env.Clock, d, label, func() {
		if !s.ended.Load() {
			root.Send(self, msg)
		}
	})
}

// closeWindow writes the current quality window and starts the next.
func (s *supervisor) closeWindow(ctx actor.Context) {
	now := s.node.env.Clock.Now()
	w := s.window.Close(s.spec.Name, s.node.env.Node, s.wStart, now, s.prevWin)
	s.prevWin = &w
	s.window.Reset()
	s.wStart = now
	s.node.reg.setQuality(s.spec.Name, w)
	s.node.env.trace("quality", s.spec.Name, fmt.Sprintf("rows=%d failed=%d status=%s", w.RowsRead, w.RowsFailed, w.Status))
	store, self, root := s.node.env.Store, ctx.Self(), ctx.ActorSystem().Root
	s.node.env.Executor.Go(s.jobs, func(c context.Context) any {
		_, err := store.WriteQuality(c, w)
		return &qualityDone{w: w, err: err}
	}, func(v any) { root.Send(self, v) })
}
