package testkit

import (
	"container/heap"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/drover-dev/drover/internal/clock"
	"github.com/drover-dev/drover/internal/exec"
)

// Epoch is virtual time zero of every simulation.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Epoch returns the virtual time every simulation starts at.
func Epoch() time.Time { return epoch }

// scheduler runs a whole cluster on the calling goroutine in virtual time.
//
// Tasks are pending function calls owned by a node (or by the world, node
// -1). A task is ready when its time has come and its node is neither dead
// nor paused. Step runs one ready task chosen by the seeded random source;
// when none is ready, time jumps to the earliest pending task. The same
// seed and the same scenario therefore give the same run, task for task.
//
// Invariant: only the goroutine that calls Step/Run touches the scheduler
// (the testkit starts no goroutines), so it needs no locks.
type scheduler struct {
	now     time.Time
	rng     *rand.Rand
	seq     uint64
	pending taskHeap // by (at, seq)
	ready   []*task
	nodes   map[int]*nodeSched
	steps   uint64
	trace   func(node int, label string) // called before each task runs
	// instantDone, when set, is called when every task due at the current
	// virtual instant has run, before time moves on, with the nodes whose
	// mailboxes ran in it (not after an instant in which none ran).
	instantDone func(nodes map[int]bool)
	ran         map[int]bool // nodes whose mailboxes ran since instantDone was last called
}

type task struct {
	at      time.Time
	seq     uint64
	node    int // -1: the world
	label   string
	fn      func()
	stopped bool
}

type nodeSched struct {
	dead   bool
	paused bool
	held   []*task // ready tasks of a paused node
}

func newScheduler(seed uint64) *scheduler {
	return &scheduler{
		now:   epoch,
		rng:   rand.New(rand.NewPCG(seed, seed*0x9e3779b97f4a7c15+1)),
		nodes: map[int]*nodeSched{},
	}
}

func (s *scheduler) node(n int) *nodeSched {
	ns, ok := s.nodes[n]
	if !ok {
		ns = &nodeSched{}
		s.nodes[n] = ns
	}
	return ns
}

// at schedules fn for node at time t (never before now).
func (s *scheduler) at(node int, t time.Time, label string, fn func()) *task {
	if t.Before(s.now) {
		t = s.now
	}
	s.seq++
	tk := &task{at: t, seq: s.seq, node: node, label: label, fn: fn}
	heap.Push(&s.pending, tk)
	return tk
}

func (s *scheduler) after(node int, d time.Duration, label string, fn func()) *task {
	return s.at(node, s.now.Add(d), label, fn)
}

// promote moves every pending task that is due into ready, in (at, seq)
// order.
func (s *scheduler) promote() {
	for s.pending.Len() > 0 && !s.pending[0].at.After(s.now) {
		tk := heap.Pop(&s.pending).(*task)
		if tk.stopped {
			continue
		}
		if tk.node >= 0 {
			ns := s.node(tk.node)
			if ns.dead {
				continue
			}
			if ns.paused {
				ns.held = append(ns.held, tk)
				continue
			}
		}
		s.ready = append(s.ready, tk)
	}
}

// step runs one ready task, advancing time to the next task if none is
// ready and it is not after limit. It reports false when nothing is left
// to run until limit.
func (s *scheduler) step(limit time.Time) bool {
	s.promote()
	for len(s.ready) == 0 {
		// every task due now has run: the instant is done (also when the
		// run stops here, so that its last instant is checked before the
		// caller acts or reports)
		if len(s.ran) > 0 {
			s.instantDone(s.ran)
			clear(s.ran)
		}
		if s.pending.Len() == 0 || s.pending[0].at.After(limit) {
			return false
		}
		s.now = s.pending[0].at
		s.promote()
	}
	i := s.rng.IntN(len(s.ready))
	tk := s.ready[i]
	last := len(s.ready) - 1
	s.ready[i] = s.ready[last]
	s.ready[last] = nil
	s.ready = s.ready[:last]
	if tk.stopped {
		return true
	}
	// ready never holds tasks of dead or paused nodes: promote skips them,
	// kill drops and pause holds those already ready
	s.steps++
	if s.instantDone != nil && tk.label == "mailbox" {
		if s.ran == nil {
			s.ran = map[int]bool{}
		}
		s.ran[tk.node] = true
	}
	if s.trace != nil {
		s.trace(tk.node, tk.label)
	}
	tk.stopped = true
	tk.fn()
	return true
}

// runUntil runs tasks until virtual time t (inclusive), then sets now = t.
func (s *scheduler) runUntil(t time.Time) {
	for s.step(t) {
	}
	if s.now.Before(t) {
		s.now = t
	}
}

// has reports whether node n has a task with label not yet run (pending,
// ready or held by a pause).
func (s *scheduler) has(n int, label string) bool {
	match := func(tk *task) bool { return tk.node == n && !tk.stopped && tk.label == label }
	for _, tk := range s.pending {
		if match(tk) {
			return true
		}
	}
	for _, tk := range s.ready {
		if match(tk) {
			return true
		}
	}
	if ns, ok := s.nodes[n]; ok {
		for _, tk := range ns.held {
			if match(tk) {
				return true
			}
		}
	}
	return false
}

// count counts node n's tasks with label not yet run.
func (s *scheduler) count(n int, label string) int {
	return s.countMatch(n, func(l string) bool { return l == label })
}

// countPrefix counts node n's tasks not yet run whose label starts with
// prefix.
func (s *scheduler) countPrefix(n int, prefix string) int {
	return s.countMatch(n, func(l string) bool { return strings.HasPrefix(l, prefix) })
}

func (s *scheduler) countMatch(n int, is func(label string) bool) int {
	k := 0
	match := func(tk *task) bool { return tk.node == n && !tk.stopped && is(tk.label) }
	for _, tk := range s.pending {
		if match(tk) {
			k++
		}
	}
	for _, tk := range s.ready {
		if match(tk) {
			k++
		}
	}
	if ns, ok := s.nodes[n]; ok {
		for _, tk := range ns.held {
			if match(tk) {
				k++
			}
		}
	}
	return k
}

// kill drops every task of node n, now and later.
func (s *scheduler) kill(n int) {
	ns := s.node(n)
	ns.dead, ns.paused, ns.held = true, false, nil
	kept := s.ready[:0]
	for _, tk := range s.ready {
		if tk.node != n {
			kept = append(kept, tk)
		}
	}
	s.ready = kept
}

// revive lets node n run tasks again (a restarted process; new tasks only).
func (s *scheduler) revive(n int) {
	s.nodes[n] = &nodeSched{}
}

// isPaused reports whether node n is paused.
func (s *scheduler) isPaused(n int) bool {
	ns, ok := s.nodes[n]
	return ok && ns.paused
}

// pause holds node n's tasks until resume (a GC pause or SIGSTOP).
func (s *scheduler) pause(n int) {
	ns := s.node(n)
	ns.paused = true
	kept := s.ready[:0]
	for _, tk := range s.ready {
		if tk.node == n {
			ns.held = append(ns.held, tk)
		} else {
			kept = append(kept, tk)
		}
	}
	s.ready = kept
}

func (s *scheduler) resume(n int) {
	ns := s.node(n)
	if !ns.paused {
		return
	}
	ns.paused = false
	s.ready = append(s.ready, ns.held...)
	ns.held = nil
}

type taskHeap []*task

func (h taskHeap) Len() int { return len(h) }
func (h taskHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h taskHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *taskHeap) Push(x any)   { *h = append(*h, x.(*task)) }
func (h *taskHeap) Pop() any {
	old := *h
	n := len(old)
	t := old[n-1]
	old[n-1] = nil
	*h = old[:n-1]
	return t
}

// ---- per-node parts: clock, dispatcher, executor ----

// vclock is a node's view of virtual time; timers are tasks of the node.
type vclock struct {
	s     *scheduler
	node  int
	ahead time.Duration // a node's clock that runs ahead of the store's
}

func (c *vclock) Now() time.Time { return c.s.now.Add(c.ahead) }

func (c *vclock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return &vtimer{t: c.s.after(c.node, d, "timer", f)}
}

// AfterFuncLabeled implements clock.Labeler: the task is "timer:<label>".
func (c *vclock) AfterFuncLabeled(d time.Duration, label string, f func()) clock.Timer {
	return &vtimer{t: c.s.after(c.node, d, "timer:"+label, f)}
}

type vtimer struct{ t *task }

func (t *vtimer) Stop() bool {
	was := !t.t.stopped
	t.t.stopped = true
	return was
}

// dispatcher queues mailbox runs as tasks of the node.
type dispatcher struct {
	s    *scheduler
	node int
}

func (d *dispatcher) Schedule(fn func()) { d.s.after(d.node, 0, "mailbox", fn) }
func (d *dispatcher) Throughput() int    { return 300 }

// executor runs each job as a task of its node after a seeded latency, on
// the scheduler's goroutine. A job that waits (exec.Pause/Wait) has its
// result delivered that much later, or at once when its context is
// cancelled through the returned cancel.
type executor struct {
	s          *scheduler
	node       int
	minLatency time.Duration
	maxLatency time.Duration
}

type jobPause struct{ d time.Duration }

func (p *jobPause) Pause(d time.Duration) { p.d += d }

func (e *executor) latency() time.Duration {
	span := int64(e.maxLatency - e.minLatency)
	if span <= 0 {
		return e.minLatency
	}
	return e.minLatency + time.Duration(e.s.rng.Int64N(span+1))
}

func (e *executor) Go(ctx context.Context, job func(context.Context) any, deliver func(any)) context.CancelFunc {
	jctx, cancel := context.WithCancel(ctx)
	var delivery *task
	var result any
	done := false
	finish := func() {
		if done {
			return
		}
		done = true
		deliver(result)
	}
	label := "job"
	if l := exec.Label(ctx); l != "" {
		label = "job:" + l
	}
	e.s.after(e.node, e.latency(), label, func() {
		p := &jobPause{}
		result = job(exec.WithPauser(jctx, p))
		if p.d <= 0 {
			cancel()
			finish()
			return
		}
		delivery = e.s.after(e.node, p.d, "job-wait", func() { cancel(); finish() })
	})
	return func() {
		cancel()
		if delivery != nil && !delivery.stopped && !done {
			// the job is waiting: a cancelled wait returns promptly
			delivery.stopped = true
			e.s.after(e.node, 0, "job-cancelled", finish)
		}
	}
}

func (e *executor) String() string { return fmt.Sprintf("executor(node %d)", e.node) }
