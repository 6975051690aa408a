package actors

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/drover-dev/drover/actors/events"
	"github.com/drover-dev/drover/actors/placement"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/internal/mutate"
)

// ---- children: placement, spawning and stopping units, restarts ----

// eligible are the members placement may give this source's units to:
// those that run the source (gossiped source tags).
func (s *supervisor) eligible() []placement.Member {
	if mutate.On(mutate.PlaceIgnoringSources) {
		return s.members // the bug of issue 9 item 12
	}
	out := make([]placement.Member, 0, len(s.members))
	for _, m := range s.members {
		if _, runs, _ := m.Source(s.id, s.node.digest.Load()); runs || m.Name == s.node.env.Node {
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
		eligible := s.eligibleUnits()
		// The clamp of the whole view, not of the eligible members: the
		// same on every node that sees the same view.
		limit := placement.EffectiveMaxCapacity(s.members, s.node.env.MaxCapacity)
		owned := placement.Owned
		if s.node.env.Placement != nil {
			owned = s.node.env.Placement
		}
		for _, u := range owned(s.node.env.Node, eligible, s.eligible(), limit) {
			want[u] = true
		}
	}
	// stop what we should not own, in unit order (determinism)
	for _, u := range slices.Sorted(maps.Keys(s.children)) {
		c := s.children[u]
		if want[u] || c.stopping {
			continue
		}
		c.stopping = true
		s.recordPlacement(events.KindGivenUp, u)
		if c.waiting {
			// suspended after a failure: nothing in flight, stop it now
			if c.restartT != nil {
				c.restartT.Stop()
			}
			ctx.Stop(c.pid)
			continue
		}
		s.tell(ctx, c, &stopUnit{})
	}
	// start what we should own
	now := s.node.env.Clock.Now()
	s.queued = s.queued[:0]
	for _, u := range slices.Sorted(maps.Keys(want)) {
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
		s.queued = append(s.queued, u)
	}
	s.startQueued(ctx)
}

// startQueued spawns the queued units while the node has start slots for
// them (startgate.go), and waits for slots for the rest.
func (s *supervisor) startQueued(ctx actor.Context) {
	for {
		started := 0
		for _, u := range s.queued {
			if _, ok := s.children[u]; ok {
				started++
				continue // started meanwhile (a passive unit's record, a reconcile)
			}
			if !s.node.starts.take() {
				break
			}
			started++
			s.recordPlacement(events.KindAssigned, u)
			s.spawn(ctx, u, s.node.starts.bounded())
		}
		s.queued = s.queued[:copy(s.queued, s.queued[started:])]
		if !s.node.starts.wait(ctx.Self(), len(s.queued)) {
			break
		}
	}
	if len(s.queued) == 0 && cap(s.queued) > compactMin {
		s.queued = nil // the room a start wave grew it to
	}
}

// recordPlacement records a placement decision about unit in the node's
// event log, with the size of the view it was made on.
func (s *supervisor) recordPlacement(kind, unit string) {
	e := events.Event{Source: s.spec.Name, Unit: unit, Kind: kind, Members: len(s.members)}
	if kind == events.KindGivenUp && s.draining {
		e.Reason = "the source drains"
	}
	s.node.env.Events.Record(e)
}

// partition is the broker's partition of unit ("<source>/<ID>"), with
// the parents its last discovery listed.
func (s *supervisor) partition(unit string) brokers.Partition {
	return brokers.Partition{ID: strings.TrimPrefix(unit, s.spec.Name+"/"), Parents: s.parents[unit]}
}

// eligibleUnits are the units placement is asked about: listed and not
// finished, sorted. The caller must not change the slice.
func (s *supervisor) eligibleUnits() []string {
	if s.eligibleSorted == nil {
		eligible := make([]string, 0, len(s.units))
		for u := range s.units {
			if !s.finished[u] {
				eligible = append(eligible, u)
			}
		}
		sort.Strings(eligible)
		s.eligibleSorted = eligible
	}
	return s.eligibleSorted
}

// unitsChanged is called after every change of units or finished.
func (s *supervisor) unitsChanged() { s.eligibleSorted = nil }

// spawn starts unit's actor; slot: with one of the node's start slots
// (startgate.go), which the unit gives back.
func (s *supervisor) spawn(ctx actor.Context, unit string, slot bool) {
	// the entry first: the child may write its status before spawn returns
	c := &child{unit: unit, gen: s.node.reg.addUnit(s.spec.Name, unit)}
	c.slot.Store(slot) // before the actor runs: it may give the slot back at once
	s.children[unit] = c
	s.spawnChild(ctx, c, nil)
}

// spawnChild spawns c's actor: a new unit, or one activated from its
// passive record r.
func (s *supervisor) spawnChild(ctx actor.Context, c *child, r *passiveUnit) {
	p := s.partition(c.unit)
	node, spec := s.node, s.spec
	_, initial := slices.BinarySearch(s.initial, c.unit)
	initial = initial || spec.isQueue()
	stale := s.stale[c.unit]
	// The mailbox is protoactor's lock-free unbounded one: two linked
	// queues that allocate per message, not a ring of ten slots per actor
	// up front. A unit receives few messages (its jobs' results, its
	// timers), and a node may hold 10,000 mostly idle ones (issue 12
	// item 5).
	unitMailbox := actor.WithMailbox(actor.UnboundedLockfree())
	props := func(r *passiveUnit) *actor.Props {
		return actor.PropsFromProducer(func() actor.Actor {
			u := newUnit(node, spec, p, initial)
			// the supervisor's string, not a copy per spawn: the unit
			// hands its id to the leaser, the tree and the store calls,
			// and what keeps it outlives the actor
			u.id = c.unit
			u.gen = c.gen
			u.staleFinish = stale
			u.exit = &c.exit
			u.handoff = &c.handoff
			u.slot = &c.slot
			// restarted after it failed: its first success is a recovery
			u.recovering = c.failed.Load()
			// the record is for the first instance only: a restart starts anew
			u.record, r = r, nil
			return u
		}, append(node.props(), unitMailbox)...)
	}
	// Named after the partition, not numbered: an actor spawned again (a
	// passive unit woken, a unit started again after it stopped) takes
	// the same entry of protoactor's process registry, a map of 32,768
	// small maps that never shrink, instead of a new one each time. The
	// name is free once the actor before stopped (its Terminated comes
	// after the registry forgot it); messages sent to the old PID that
	// reach the new actor are those every unit checks anyway (incarnation,
	// lease token). protoactor makes the actor before it finds the name
	// taken, so the name is looked up first and a numbered one taken if
	// it is (only this supervisor adds names under its own).
	var pid *actor.PID
	if _, taken := ctx.ActorSystem().ProcessRegistry.GetLocal(ctx.Self().Id + "/" + p.ID); !taken {
		var err error
		if pid, err = ctx.SpawnNamed(props(r), p.ID); err != nil {
			pid = nil
		}
	}
	if pid == nil {
		pid = ctx.SpawnPrefix(props(r), p.ID)
	}
	c.pid = pid
	s.byPID[pid.Id] = c
	s.pidPeak = max(s.pidPeak, len(s.byPID))
}

// compactMin is the smallest peak compacted copies a map after.
const compactMin = 64

// compacted returns m, or a copy of it once it holds under a quarter of
// peak entries, with the peak to go on with: Go's maps keep the room they
// grew to. A supervisor's map of actors by PID grows to all its units
// while they start, then empties as they passivate; kept, its buckets
// cost about 50 bytes per idle unit (issue 12 item 5). A copy costs at
// most a quarter of the deletions since the last one.
func compacted[K comparable, V any](m map[K]V, peak int) (map[K]V, int) {
	if peak < compactMin || 4*len(m) >= peak {
		return m, peak
	}
	c := make(map[K]V, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c, len(c)
}

// forgetProcess is sent to a child that stopped: protoactor's set of a
// parent's children keeps the PIDs of removed children past its length
// (PIDSet.Remove shortens the slice without clearing the slot), and a PID
// caches its process — its mailbox, context and actor, the whole unit.
// A message to a stopped process makes the PID drop that cache (the
// message goes to the dead letters, unlogged). With thousands of units
// passivating, the stale slots held most of what passivation frees.
type forgetProcess struct{}

func (forgetProcess) IgnoreDeadLetterLogging() {}

func (s *supervisor) onTerminated(ctx actor.Context, pid *actor.PID) {
	c, ok := s.byPID[pid.Id]
	if !ok {
		return
	}
	ctx.Send(pid, forgetProcess{})
	s.releaseSlot(ctx, c)
	delete(s.byPID, pid.Id)
	s.byPID, s.pidPeak = compacted(s.byPID, s.pidPeak)
	if c.exit.Load() == exitPassive {
		if r := c.handoff.Swap(nil); r != nil {
			s.adopt(ctx, c, r)
			return
		}
	}
	delete(s.children, c.unit)
	if c.restartT != nil {
		c.restartT.Stop()
	}
	s.node.reg.removeUnit(s.spec.Name, c.unit, c.gen)
	s.node.metrics.Forget(s.spec.Name, c.unit)
	s.node.env.trace("unit-stopped", c.unit, "")
	exit := c.exit.Load()
	if exit == exitFinished {
		s.finished[c.unit] = true
		s.unitsChanged()
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
		d := s.node.tuning.LeaseLostPause + s.node.env.Rand.Jitter(s.node.tuning.LeaseLostPause/2)
		s.cooldown[c.unit] = s.node.env.Clock.Now().Add(d)
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
			s.node.env.trace("drained", s.spec.Name, "")
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
	d := backoff(s.node.env.Rand, c.restarts, s.node.tuning.RestartBase, s.node.tuning.RestartCap)
	if f, ok := reason.(*unitFailure); ok && errors.Is(f.err, brokers.ErrUnknownPartition) {
		// the partition may be gone (a recreated topic, a forgotten
		// shard): list them again rather than wait for the next discovery
		root, self := s.node.root(), s.self
		root.Send(self, &discoverTick{from: s})
	}
	next := s.node.env.Clock.Now().Add(d)
	msg := fmt.Sprint(reason)
	if f, ok := reason.(*unitFailure); ok {
		msg = f.err.Error()
	} else {
		s.node.env.logger().Error("unit actor panicked", "unit", c.unit, "panic", msg)
	}
	s.node.env.trace("restart-scheduled", c.unit, fmt.Sprintf("n=%d in=%s", c.restarts, d))
	s.node.env.Events.Record(events.Event{Source: s.spec.Name, Unit: c.unit, Kind: events.KindRestart,
		Reason: fmt.Sprintf("restart %d in %s: %s", c.restarts, d.Round(time.Millisecond), msg)})
	now := s.node.env.Clock.Now()
	s.node.reg.unit(s.spec.Name, c.unit, c.gen, func(st *treeUnit) {
		st.setState(StateRetrying)
		st.setError(msg, now)
		st.setNextRetry(next)
	})
	c.waiting = true
	s.releaseSlot(s.node.root(), c) // suspended for the backoff: it starts nothing meanwhile
	if c.stopping || s.draining {
		sup.StopChildren(who)
		return
	}
	self, root, unit := s.self, s.node.root(), c.unit
	c.restartT = s.node.env.Clock.AfterFunc(d, func() { root.Send(self, &restartDue{unit: unit, pid: who}) })
}

// restartWaiting restarts, soon, the children waiting out a restart
// backoff: the store answers again, and a unit that failed on its outage
// need not wait up to RestartCap more (each within a second, with jitter,
// so that a node's units do not all start in the same instant).
func (s *supervisor) restartWaiting(ctx actor.Context) {
	for _, u := range slices.Sorted(maps.Keys(s.children)) {
		c := s.children[u]
		if !c.waiting || c.stopping || c.restartT == nil {
			continue
		}
		c.restartT.Stop()
		d := s.node.env.Rand.Jitter(time.Second)
		self, root, unit, pid := s.self, s.node.root(), c.unit, c.pid
		c.restartT = s.node.env.Clock.AfterFunc(d, func() { root.Send(self, &restartDue{unit: unit, pid: pid}) })
		s.node.env.trace("restart-sooner", c.unit, d.String())
	}
}

func (s *supervisor) onRestartDue(ctx actor.Context, m *restartDue) {
	c, ok := s.children[m.unit]
	// c.pid is nil while the unit is passive: a restartDue that outlived
	// its restart (restartWaiting armed another) finds it so
	if !ok || c.pid == nil || c.pid.Id != m.pid.Id || !c.waiting {
		return
	}
	c.waiting = false
	c.restartT = nil
	if c.stopping || s.draining {
		ctx.Stop(c.pid)
		return
	}
	s.node.env.trace("restarted", c.unit, strconv.Itoa(c.restarts))
	s.node.reg.unit(s.spec.Name, c.unit, c.gen, func(st *treeUnit) { st.restarted() })
	s.node.metrics.Restarted(s.spec.Name, c.unit)
	s.sup.RestartChildren(c.pid)
	// the new incarnation starts with the parents it was spawned with:
	// tell it those listed now
	if _, ok := s.units[c.unit]; ok && !s.spec.isQueue() {
		ctx.Send(c.pid, &parentsListed{parents: s.parents[c.unit]})
	}
}
