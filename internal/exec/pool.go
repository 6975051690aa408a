package exec

import (
	"sync"
	"sync/atomic"
	"time"
)

// Pool runs functions on goroutines that it keeps for reuse: a function
// handed to Go runs on a goroutine that finished an earlier one and waits
// for work, or on a new goroutine when none waits. Go never blocks and
// never queues: the pool is unbounded, since the jobs it runs may block
// for long (a 20 s long poll), and a bounded pool would make the next job
// wait for them.
//
// Why keep goroutines: a new goroutine starts with a small stack, and a
// store call (SQLite's VDBE in particular) or an actor's Receive needs a
// deep one, so every new goroutine copied its stack several times as it
// grew (runtime.newstack: 6-7 % of a node's CPU at 30k msg/s when every
// job and every mailbox run had a goroutine of its own). A kept goroutine
// has its grown stack already; the runtime shrinks the stacks of those
// that wait long (at a collection, when less than a quarter is used).
//
// A goroutine that has waited Keep for work exits. Close makes the
// waiting ones exit at once; Go after Close still runs f, on a goroutine
// of its own. The zero value is not usable: make one with NewPool.
//
// The pool is production wiring, like the Goroutines executor: it takes
// its time from the machine. The testkit runs no goroutines at all.
type Pool struct {
	keep time.Duration
	idle chan func() // unbuffered: a send succeeds only when a goroutine waits for work
	quit chan struct{}
	once sync.Once

	// for tests: goroutines started, and goroutines waiting for work
	started, waiting atomic.Int64
}

// DefaultKeep is how long a pool goroutine waits for work before it
// exits, when NewPool is given 0.
const DefaultKeep = 2 * time.Second

// NewPool returns a pool whose goroutines wait keep for work (0:
// DefaultKeep).
func NewPool(keep time.Duration) *Pool {
	if keep <= 0 {
		keep = DefaultKeep
	}
	return &Pool{keep: keep, idle: make(chan func()), quit: make(chan struct{})}
}

// Go runs f on a waiting goroutine of the pool, or on a new one.
func (p *Pool) Go(f func()) {
	select {
	case p.idle <- f:
	case <-p.quit:
		go f()
	default:
		p.started.Add(1)
		go p.work(f)
	}
}

// work runs f, then whatever Go hands it, until it waited keep or the pool
// closed.
func (p *Pool) work(f func()) {
	t := time.NewTimer(p.keep)
	defer t.Stop()
	for {
		f()
		f = nil // let what it captured go while waiting
		t.Reset(p.keep)
		p.waiting.Add(1)
		select {
		case f = <-p.idle:
			p.waiting.Add(-1)
		case <-t.C:
			p.waiting.Add(-1)
			return
		case <-p.quit:
			p.waiting.Add(-1)
			return
		}
	}
}

// Close makes the goroutines waiting for work exit; those running finish
// their function first. It may be called more than once.
func (p *Pool) Close() {
	p.once.Do(func() { close(p.quit) })
}

// Dispatcher runs actor mailboxes on a Pool: protoactor's own dispatcher
// starts a goroutine for every run of a mailbox (an actor that receives a
// message while idle), whose stack then grows again in the actor's
// Receive. It implements protoactor's actor.Dispatcher.
type Dispatcher struct {
	Pool *Pool
	// Messages is how many messages a mailbox run processes before it
	// yields (protoactor's throughput; its default is 300).
	Messages int
}

// Schedule runs fn on the pool.
func (d Dispatcher) Schedule(fn func()) { d.Pool.Go(fn) }

// Throughput is Messages.
func (d Dispatcher) Throughput() int { return d.Messages }
