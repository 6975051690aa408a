package actors

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/drover-dev/drover/internal/exec"
)

// ---- passive units: the supervisor's side (unit_passive.go) ----

// exitPassive: the unit passivated; its record is in child.handoff.
const exitPassive int32 = 3

// messages
type (
	// passiveWoken is a Waker's call for a passive unit's arrangement seq.
	passiveWoken struct {
		c   *child
		seq uint64
	}
	// passiveSweep checks the passive units whose WakeSafety is up.
	passiveSweep struct{ from *supervisor }
)

// adopt takes the record of a unit that passivated: the child stays, with
// no actor, the leaser sends a lost lease's note here, and the Waker's
// call comes here.
func (s *supervisor) adopt(ctx actor.Context, c *child, r *passiveUnit) {
	c.exit.Store(0)
	c.pid = nil
	c.passive = r
	ctx.Send(s.node.leaser, &leaseOwner{unit: c.unit, token: r.lease.token, pid: s.self})
	s.node.reg.unit(s.spec.Name, c.unit, c.gen, func(st *treeUnit) { st.passive = true })
	if c.stopping || s.draining {
		s.activate(ctx, c, resumeStop)
		return
	}
	s.arrangeWake(ctx, c)
	if c.passive != nil {
		s.armSweep(ctx, r.due.time())
	}
}

// arrangeWake asks the passive unit's Waker to call; a reader closed
// meanwhile activates the unit, whose fetch reports it.
func (s *supervisor) arrangeWake(ctx actor.Context, c *child) {
	r := c.passive
	w := r.conn.waker()
	r.seq++
	self, root, seq, ended := s.self, s.node.root(), r.seq, &s.ended
	err := r.conn.use(func() error {
		r.cancel = w.Wake(func() {
			if !ended.Load() {
				root.Send(self, &passiveWoken{c: c, seq: seq})
			}
		})
		return nil
	})
	if err != nil {
		s.activate(ctx, c, resumeFetch)
	}
}

func (s *supervisor) onPassiveWoken(ctx actor.Context, m *passiveWoken) {
	c := m.c
	if s.children[c.unit] != c || c.passive == nil || c.passive.seq != m.seq {
		return // activated meanwhile, or gone
	}
	s.activate(ctx, c, resumeFetch)
}

// armSweep makes sure a sweep runs by due.
func (s *supervisor) armSweep(ctx actor.Context, due time.Time) {
	if s.sweepT != nil && !due.Before(s.sweepAt) {
		return
	}
	if s.sweepT != nil {
		s.sweepT.Stop()
	}
	s.sweepAt = due
	s.sweepT = s.after(ctx, max(0, due.Sub(s.node.env.Clock.Now())), &passiveSweep{from: s})
}

// sweep looks at the passive units whose WakeSafety is up, and those
// whose is up within an eighth of it (one sweep for many units, a little
// early rather than late), in unit order, without spawning them: it
// arranges each one's Waker call anew. A Waker calls at once when its
// reader may already return something (brokers.Waker), so a call the
// broker missed shows now and activates the unit (onPassiveWoken), as the
// unit's own fetch would have found it; a quiet unit stays passive until
// its next check. Spawning every passive unit to fetch nothing cost an
// actor, a fetch job and a passivation per unit and WakeSafety: about a
// quarter of an idle node's CPU (issue 12 item 5).
func (s *supervisor) sweep(ctx actor.Context) {
	s.sweepT = nil
	safety := s.node.tuning.WakeSafety
	now := s.node.env.Clock.Now()
	upto := now.Add(safety / 8)
	var next time.Time
	for _, u := range slices.Sorted(maps.Keys(s.children)) {
		c := s.children[u]
		r := c.passive
		if r == nil {
			continue
		}
		due := r.due.time()
		if !due.After(upto) {
			s.node.env.trace("wake-check", c.unit, safety.Round(time.Millisecond).String())
			if r.cancel != nil {
				r.cancel()
				r.cancel = nil
			}
			due = now.Add(safety)
			r.due = stampOf(due)
			s.arrangeWake(ctx, c)
			if c.passive == nil {
				continue // its reader closed meanwhile: activated
			}
		}
		if next.IsZero() || due.Before(next) {
			next = due
		}
	}
	if !next.IsZero() {
		s.armSweep(ctx, next)
	}
}

// activate spawns a passive unit's actor again from its record.
func (s *supervisor) activate(ctx actor.Context, c *child, how resumeKind) {
	r := c.passive
	if r.cancel != nil {
		r.cancel()
		r.cancel = nil
	}
	c.passive = nil
	r.resume = how
	s.node.reg.unit(s.spec.Name, c.unit, c.gen, func(st *treeUnit) { st.passive = false })
	s.spawnChild(ctx, c, r)
}

// tell hands a message for a child to its actor, or, for a passive unit,
// does what its actor would: a stopUnit activates it to stop, a lost
// lease (of its token) to give the lease up.
func (s *supervisor) tell(ctx actor.Context, c *child, msg any) {
	if c.passive == nil {
		if c.pid != nil {
			ctx.Send(c.pid, msg)
		}
		return
	}
	switch m := msg.(type) {
	case *stopUnit:
		s.activate(ctx, c, resumeStop)
	case *leaseLostNote:
		if m.token == c.passive.lease.token {
			s.activate(ctx, c, resumeLost)
		}
	}
}

// onLeaseLost: the leaser reports a lease lost to this supervisor — a
// passive unit's, or one whose actor was just spawned again (and has not
// told the leaser yet).
func (s *supervisor) onLeaseLost(ctx actor.Context, m *leaseLostNote) {
	if c, ok := s.children[m.unit]; ok {
		s.tell(ctx, c, m)
	}
}

// dropPassive ends every passive unit of this instance as a unit's hard
// stop ends it (the supervisor stops or restarts).
func (s *supervisor) dropPassive(stopped bool) {
	for _, u := range slices.Sorted(maps.Keys(s.children)) {
		c := s.children[u]
		if r := c.passive; r != nil {
			c.passive = nil
			s.endPassive(c, r, stopped)
		}
	}
}

// dropHandoff ends the record of a unit that passivated while this
// instance stopped or restarted (its Terminated came after the end).
func (s *supervisor) dropHandoff(pid *actor.PID, stopped bool) {
	if c, ok := s.byPID[pid.Id]; ok {
		s.releaseSlot(s.node.root(), c)
	}
	if c, ok := s.byPID[pid.Id]; ok && c.exit.Load() == exitPassive {
		if r := c.handoff.Swap(nil); r != nil {
			s.endPassive(c, r, stopped)
		}
	}
}

// endPassive ends a passive unit as a unit's hard stop does: its Waker
// arrangement is cancelled, the leaser forgets its lease, its reader is
// closed and its lease released in the background. stopped: the
// supervisor stops (the entry shows stopped), not restarts (forgetUnits
// removes the entry).
func (s *supervisor) endPassive(c *child, r *passiveUnit, stopped bool) {
	if r.cancel != nil {
		r.cancel()
	}
	s.node.root().Send(s.node.leaser, &leaseDropped{unit: c.unit, token: r.lease.token})
	if stopped {
		s.node.reg.unit(s.spec.Name, c.unit, c.gen, func(st *treeUnit) {
			st.setState(StateStopped)
			st.passive = false
			st.dropLease()
			st.setNextRetry(time.Time{})
		})
	}
	conn, store, l := r.conn, s.node.env.Store, r.lease.full(s.node.env.Node)
	s.node.env.Executor.Go(exec.WithLabel(s.node.ctx, "release"), func(c context.Context) any {
		conn.close()
		return store.Release(c, l)
	}, func(any) {})
}
