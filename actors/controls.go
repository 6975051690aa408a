package actors

import (
	"context"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/drover-dev/drover/persistence"
)

// ---- controls: pause and resume (issue 13 item 1) ----
//
// The controls table (persistence.Controls) is the truth: a unit is paused
// while its own row or its source's says so, whichever node owns it. Every
// node holds a view of the table (controlView), read once at start (the
// start-up sweep, before any supervisor starts) and then in every renewal
// round, in the round's job after RenewLeases: one statement per node and
// round, however many units. The node that writes a control applies the
// table at once (Node.SetControls). A change of the view is told to every
// supervisor (controlsChanged), which tells its units and activates its
// passive units that are now paused, so that they show paused.
//
// A unit looks at the view where it would fetch (fetch, and the fetch
// ahead): a paused one fetches nothing and enters phasePaused (tree state
// paused), holding its lease (the leaser renews it as before) and its
// reader. What it had fetched before is applied first (and acked): a
// fetch in flight, the fetch ahead and every batch of them, so nothing is
// half-applied; a unit idle on its Waker pauses at once. Resumed, it
// fetches from where it is (its checkpoint). A paused unit never
// passivates. A unit that moves, a node that restarts, reads the same
// table: until a node has read it once, its units count as paused (they
// wait rather than fetch what an operator paused). The cost for a unit
// that is not paused is one atomic load and, only while some target is
// paused, a map lookup, per fetch.

// controlView is a node's view of the controls table. Its zero value (and
// nil) pauses nothing; a node starts it unknown.
type controlView struct {
	v atomic.Pointer[pausedSet]
	// gen counts the views set: a renewal round's read that began before
	// a newer view was set (SetControls) is dropped, not set over it.
	gen atomic.Uint64

	// done is, per unit, the newest control-row seek this node's actors
	// carried out or marked done: a view read before that commit may
	// still show it pending (unit_seekrow.go). told is, per unit with a
	// seek pending, the newest seek id its unit was told of (tell-once).
	doneMu sync.Mutex
	done   map[string]int64
	told   map[string]int64
}

// pausedSet is one view: the paused sources and units.
type pausedSet struct {
	unknown bool // not read yet: everything waits
	sources map[string]bool
	units   map[string]bool
	// seeks are the unit rows with a seek pending (SeekID > SeekDoneID).
	seeks map[string]persistence.Control
}

func newControlView() *controlView {
	c := &controlView{}
	c.v.Store(&pausedSet{unknown: true})
	return c
}

// paused reports whether unit of source must not fetch.
func (c *controlView) paused(source, unit string) bool {
	if c == nil {
		return false
	}
	p := c.v.Load()
	if p == nil {
		return false
	}
	if p.unknown {
		return true
	}
	if len(p.sources) == 0 && len(p.units) == 0 {
		return false
	}
	return p.sources[source] || p.units[unit]
}

// set makes cs the view; it returns what to tell (nil: nothing): every
// unit when what is paused changed, else only the units with a seek
// pending that this node has not told of yet (tell-once, unit_seekrow.go).
func (c *controlView) set(cs []persistence.Control) *controlsChanged {
	n := &pausedSet{sources: map[string]bool{}, units: map[string]bool{}}
	for _, x := range cs {
		if x.PendingSeek() {
			if n.seeks == nil {
				n.seeks = map[string]persistence.Control{}
			}
			n.seeks[x.Unit] = x
		}
		switch {
		case !x.Paused:
		case x.Unit == "":
			n.sources[x.Source] = true
		default:
			n.units[x.Unit] = true
		}
	}
	c.gen.Add(1)
	old := c.v.Swap(n)
	m := &controlsChanged{all: old == nil || old.unknown || !maps.Equal(old.sources, n.sources) || !maps.Equal(old.units, n.units)}
	m.seeks = c.tell(n.seeks)
	if !m.all && len(m.seeks) == 0 {
		return nil
	}
	return m
}

// controlsChanged tells the node actor, its supervisors and their units
// that the control view changed: all of them (all), or the units of seeks
// (their ids, sorted) only.
type controlsChanged struct {
	all   bool
	seeks []string
}

// SetControls applies cs, the whole controls table as just read, at once
// (the node that writes a control calls it; the others read the table at
// their next renewal round). Safe from any goroutine.
func (n *Node) SetControls(cs []persistence.Control) {
	if m := n.node.controls.set(cs); m != nil {
		n.node.system.Root.Send(n.root, m)
	}
}

// controlsRead is what a renewal round read of the controls table.
type controlsRead struct {
	gen  uint64 // controlView.gen when the round began
	rows []persistence.Control
	err  error
}

// readControls returns the read of the controls table for a job that
// begins now (nil for a node with no view: the unit scripts'). The read
// also marks done, expired, the seeks pending past the expiry and its
// grace (expireSeeks).
func readControls(e *nodeEnv) func(context.Context) *controlsRead {
	if e.controls == nil {
		return nil
	}
	gen, store, now := e.controls.gen.Load(), e.env.Store, e.env.Clock.Now()
	expiry, node := e.tuning.SeekExpiry, e.env.Node
	return func(c context.Context) *controlsRead {
		rows, err := store.ListControls(c)
		if err == nil {
			expireSeeks(c, store, rows, now, expiry, node)
		}
		return &controlsRead{gen: gen, rows: rows, err: err}
	}
}

// applyRead sets what a round or the start-up sweep read, unless a newer
// view was set since it began; it returns what to tell (nil: nothing).
func (c *controlView) applyRead(r *controlsRead) *controlsChanged {
	if c == nil || r == nil || r.err != nil || c.gen.Load() != r.gen {
		return nil
	}
	return c.set(r.rows)
}

// onControls tells the supervisor's units of a change of the view (those
// m is for); a passive unit now paused is activated, so that its actor
// shows it paused.
func (s *supervisor) onControls(ctx actor.Context, m *controlsChanged) {
	units := m.seeks
	if m.all {
		units = slices.Sorted(maps.Keys(s.children))
	}
	for _, u := range units {
		c := s.children[u]
		switch {
		case c == nil:
		case c.passive != nil:
			if row, ok := s.node.controls.pendingSeek(c.unit); ok && c.passive.seek == nil && !s.spec.isQueue() {
				c.passive.seek = rowSeek(row)
				s.activate(ctx, c, resumeSeek)
			} else if s.node.controls.paused(s.spec.Name, c.unit) {
				s.activate(ctx, c, resumeFetch)
			}
		case c.pid != nil:
			ctx.Send(c.pid, m)
		}
	}
}

// pauseBeforeFetch: the unit is about to fetch; when it is paused it
// enters phasePaused instead and reports true.
func (u *unitActor) pauseBeforeFetch() bool {
	if !u.node.controls.paused(u.spec.Name, u.id) {
		return false
	}
	u.node.env.trace("paused", u.id, "")
	u.becomePaused()
	return true
}

// onControls: the view changed. A paused unit resumed fetches; a unit
// idle on its Waker that is now paused pauses at once (others pause at
// their next fetch, once what they fetched is applied).
func (u *unitActor) onControls(ctx actor.Context) {
	u.node.env.trace("controls-told", u.id, "")
	defer u.pickUpSeek(ctx) // a control-row seek (unit_seekrow.go)
	paused := u.node.controls.paused(u.spec.Name, u.id)
	switch {
	case u.phase == phasePaused && !paused:
		u.node.env.trace("resumed", u.id, "")
		u.becomeRunning()
		// A job in flight (a seek begun while paused) fetches when it
		// ends: a fetch now would read the reader the seek closed.
		if u.inflight == 0 && u.seek == nil {
			u.fetch(ctx)
		}
	case paused && u.phase == phaseRunning && u.wake.cancel != nil:
		u.cancelWake()
		u.pauseBeforeFetch()
	}
}
