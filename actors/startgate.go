package actors

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// startGate bounds how many of a node's units are starting at once
// (Tuning.MaxStarting): spawned and not yet at their first fetch.
// A cold start of 10,000 units otherwise spawns 10,000 actors whose lease
// acquisitions and opens all wait on the store at once (on SQLite's one
// connection, about 8,000 goroutines): the wave leaves the process's heap
// with room between the objects that outlive it, which Go cannot compact,
// and protoactor's registry maps at the size they grew to (issue 12
// item 5). The store serialises those calls anyway, so a bound of a few
// hundred costs a start nothing.
//
// A supervisor takes a slot for each unit it spawns and queues the rest;
// the unit gives its slot back when it starts its first fetch (a long
// poll holds none), when it waits (for a lease held elsewhere, for its
// parents), when it fails, pauses or stops, and when its actor ends. While supervisors wait for slots, idle
// units that have received nothing since their start passivate at once
// instead of after PassivateAfter, so that the actors alive stay about as
// many as the slots (unit_passive.go).
//
// Shared by the node's supervisors and units, so a mutex guards it.
type startGate struct {
	mu    sync.Mutex
	limit int // 0: no bound
	held  int
	peak  int // the most slots held at once (tests)
	// waiting are the supervisors to tell when slots free, each once, in
	// the order they asked (determinism: the order their reconciles ran).
	waiting []*actor.PID
	// queued is how many units each supervisor (by PID id) has queued,
	// and queuedAll their sum: while it is above 0, idle units passivate
	// at once.
	queued    map[string]int
	queuedAll atomic.Int64 // read without the lock by contended
}

func newStartGate(limit int) *startGate { return &startGate{limit: limit} }

// take takes a slot if one is free.
func (g *startGate) take() bool {
	if g == nil || g.limit <= 0 {
		return true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held >= g.limit {
		return false
	}
	g.held++
	g.peak = max(g.peak, g.held)
	return true
}

// bounded reports whether the gate bounds anything (a slot taken must be
// given back).
func (g *startGate) bounded() bool { return g != nil && g.limit > 0 }

// wait records that supervisor pid has n units queued, and, when n > 0,
// that it is to be told (startSlotsFree) when slots are free again —
// unless a slot is free already (given back since the caller's take
// failed, by a release that found nobody to tell): then it reports true,
// and the caller takes again instead of waiting for a call that may
// never come.
func (g *startGate) wait(pid *actor.PID, n int) (free bool) {
	if !g.bounded() {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.queuedAll.Add(int64(n - g.queued[pid.Id]))
	if n == 0 {
		delete(g.queued, pid.Id)
		g.waiting = slices.DeleteFunc(g.waiting, pid.Equal) // a stopped supervisor is told nothing
		return false
	}
	if g.queued == nil {
		g.queued = map[string]int{}
	}
	g.queued[pid.Id] = n
	if g.held < g.limit {
		return true
	}
	for _, w := range g.waiting {
		if w.Equal(pid) {
			return false
		}
	}
	g.waiting = append(g.waiting, pid)
	return false
}

// contended reports whether supervisors wait for slots.
func (g *startGate) contended() bool {
	return g.bounded() && g.queuedAll.Load() > 0
}

// release gives a slot back. Once an eighth of the slots are free, every
// waiting supervisor is told (a supervisor that stopped meanwhile loses
// the message, and the others are told all the same); those that find no
// slot queue again.
func (g *startGate) release(send func(pid *actor.PID, msg any)) {
	if g == nil || g.limit <= 0 {
		return
	}
	g.mu.Lock()
	g.held--
	var tell []*actor.PID
	if len(g.waiting) > 0 && g.limit-g.held >= max(1, g.limit/8) {
		tell, g.waiting = g.waiting, nil
	}
	g.mu.Unlock()
	for _, pid := range tell {
		send(pid, &startSlotsFree{})
	}
}

// startSlotsFree tells a waiting supervisor to start the units it queued.
type startSlotsFree struct{}

// IgnoreDeadLetterLogging: a supervisor that stopped after it was told
// loses the message, which is no news.
func (*startSlotsFree) IgnoreDeadLetterLogging() {}

// startSlot is a child's slot of the gate: set when its supervisor spawns
// it with one, cleared by whoever gives it back first.
type startSlot = atomic.Bool

// releaseStart gives the unit's slot back, if it still holds one.
func (u *unitActor) releaseStart() {
	if u.slot != nil && u.slot.Swap(false) {
		u.node.starts.release(u.node.root().Send)
	}
}

// releaseSlot gives c's start slot back if its actor ended holding it
// (it gives it back itself at its end; this is the backstop).
func (s *supervisor) releaseSlot(sender actor.SenderContext, c *child) {
	if c.slot.Swap(false) {
		s.node.starts.release(sender.Send)
	}
}
