package exec

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Pool runs functions on goroutines that it keeps for reuse: a function
// handed to Go runs on the goroutine that most recently finished one and
// waits for work, or on a new goroutine when none waits. Go never blocks
// and never queues: the pool is unbounded, since the jobs it runs may
// block for long (a 20 s long poll), and a bounded pool would make the
// next job wait for them.
//
// Why keep goroutines: a new goroutine starts with a small stack, and a
// store call (SQLite's VDBE in particular) or an actor's Receive needs a
// deep one, so every new goroutine copied its stack several times as it
// grew (runtime.newstack: 6-7 % of a node's CPU at 30k msg/s when every
// job and every mailbox run had a goroutine of its own). A kept goroutine
// has its grown stack already (a collection shrinks a stack that uses
// less than a quarter of itself, by half each time).
//
// The waiting goroutines are a stack: the one that waited least is used
// first, so under a steady load the pool keeps about as many as run at
// once and the others, waiting keep without work, exit. (A queue would
// hand each job to the goroutine that waited longest and keep every one
// of a past burst alive for as long as jobs come faster than one per
// keep.) Close makes the waiting ones exit at once; Go after Close still
// runs f, on a goroutine of its own. Make one with NewPool.
//
// The pool is production wiring, like the Goroutines executor: it takes
// its time from the machine. The testkit runs no goroutines at all.
type Pool struct {
	keep time.Duration

	mu     sync.Mutex
	idle   []*poolWorker // waiting for work; the last waited least
	closed bool

	started atomic.Int64 // goroutines started (tests)
}

// poolWorker is a goroutine of the pool. Go hands it a function through
// ch after taking it off the idle stack, so the send never blocks; a nil
// function tells it to exit (Close).
type poolWorker struct{ ch chan func() }

// DefaultKeep is how long a pool goroutine waits for work before it
// exits, when NewPool is given 0.
const DefaultKeep = 2 * time.Second

// NewPool returns a pool whose goroutines wait keep for work (0:
// DefaultKeep).
func NewPool(keep time.Duration) *Pool {
	if keep <= 0 {
		keep = DefaultKeep
	}
	return &Pool{keep: keep}
}

// Go runs f on the goroutine of the pool that waited least, or on a new
// one. f must not be nil.
func (p *Pool) Go(f func()) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		w.ch <- f // buffered, and only this call sends to w now
		return
	}
	closed := p.closed
	p.mu.Unlock()
	if closed {
		go f()
		return
	}
	p.started.Add(1)
	go p.work(f)
}

// work runs f, then whatever Go hands it, until it waited keep or the pool
// closed.
func (p *Pool) work(f func()) {
	w := &poolWorker{ch: make(chan func(), 1)}
	t := time.NewTimer(p.keep)
	defer t.Stop()
	for {
		f()
		f = nil // let what it captured go while waiting
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return
		}
		p.idle = append(p.idle, w)
		p.mu.Unlock()
		t.Reset(p.keep)
		select {
		case f = <-w.ch:
		case <-t.C:
			// Leave the stack, unless Go (or Close) took this goroutine
			// off it meanwhile: then its function is on the way.
			p.mu.Lock()
			if i := slices.Index(p.idle, w); i >= 0 { // the longest waiting are at the bottom: found at once
				p.idle = slices.Delete(p.idle, i, i+1)
				p.mu.Unlock()
				return
			}
			p.mu.Unlock()
			f = <-w.ch
		}
		if f == nil {
			return // Close
		}
	}
}

// Close makes the goroutines waiting for work exit; those running finish
// their function first, then exit. It may be called more than once.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, w := range idle {
		w.ch <- nil
	}
}

// waiting is how many goroutines wait for work (tests).
func (p *Pool) waiting() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

// Dispatcher runs actor mailboxes on a Pool: protoactor's own dispatcher
// starts a goroutine for every run of a mailbox (an actor that receives a
// message while idle), whose stack then grows again in the actor's
// Receive. It implements protoactor's actor.Dispatcher. Pool must be set.
type Dispatcher struct {
	Pool *Pool
	// Messages is how many messages a mailbox run processes before it
	// yields (protoactor's throughput); 0: DefaultMessages.
	Messages int
}

// DefaultMessages is Dispatcher.Messages' default, protoactor's own.
const DefaultMessages = 300

// Schedule runs fn on the pool.
func (d Dispatcher) Schedule(fn func()) { d.Pool.Go(fn) }

// Throughput is Messages.
func (d Dispatcher) Throughput() int {
	if d.Messages <= 0 {
		return DefaultMessages
	}
	return d.Messages
}
