package exec

import (
	"context"
	"sync"
	"time"
)

// Executor runs jobs that may block.
type Executor interface {
	// Go runs job with a context derived from ctx and then calls deliver
	// with its result, exactly once, never from the caller's goroutine
	// during the call to Go. The returned cancel cancels that context: a
	// cancelled job returns promptly and its result is still delivered (the
	// receiver decides whether it still cares). Calling cancel after the job
	// finished does nothing.
	Go(ctx context.Context, job func(ctx context.Context) any, deliver func(any)) (cancel context.CancelFunc)
}

// Goroutines is the production Executor: every job on a goroutine of its
// own while it runs, taken from a Pool (Goroutines.Pool, or one of its
// own), so that a job does not start on a fresh stack and grow it again.
// The zero value is ready to use.
type Goroutines struct {
	// Pool runs the jobs; nil: a pool of the executor's own, made at the
	// first job and closed by Wait. A pool given here is the caller's to
	// close.
	Pool *Pool

	mu      sync.Mutex
	stopped bool
	own     *Pool
	wg      sync.WaitGroup
}

// Go starts job on a goroutine of the pool. After Wait was called it drops
// the job (the node is shutting down and nobody waits for the result).
func (g *Goroutines) Go(ctx context.Context, job func(ctx context.Context) any, deliver func(any)) context.CancelFunc {
	jctx, cancel := context.WithCancel(ctx)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		cancel()
		return cancel
	}
	p := g.Pool
	if p == nil {
		if g.own == nil {
			g.own = NewPool(0)
		}
		p = g.own
	}
	g.wg.Add(1)
	p.Go(func() {
		defer g.wg.Done()
		defer cancel()
		deliver(job(jctx))
	})
	return cancel
}

// Wait stops accepting jobs and blocks until every job started has
// delivered its result; the executor's own pool is closed then.
func (g *Goroutines) Wait() {
	g.mu.Lock()
	g.stopped = true
	own := g.own
	g.mu.Unlock()
	g.wg.Wait()
	if own != nil {
		own.Close()
	}
}

// Pauser is how a job waits inside an executor that controls time. The
// testkit's executor puts one in each job's context.
type Pauser interface {
	// Pause makes the job's result arrive d later than it would have.
	Pause(d time.Duration)
}

type pauserKey struct{}

// WithPauser returns ctx carrying p; executors that control time use it.
func WithPauser(ctx context.Context, p Pauser) context.Context {
	return context.WithValue(ctx, pauserKey{}, p)
}

// Pause waits d inside a job: on the wall clock it sleeps until d has passed
// or ctx is done (then it returns ctx.Err()); under an executor that controls
// time it records the wait with the executor's Pauser and returns at once.
// Code that runs inside jobs (in-memory brokers, fault injection) waits with
// Pause so that it stays deterministic under the testkit.
func Pause(ctx context.Context, d time.Duration) error {
	return Wait(ctx, d, nil)
}

// Wait is Pause that may end early: on the wall clock it also returns (nil)
// when wake is closed or receives. Under an executor that controls time it
// records the whole wait d and returns at once, since nothing else can
// happen while the job runs.
func Wait(ctx context.Context, d time.Duration, wake <-chan struct{}) error {
	if d <= 0 {
		return ctx.Err()
	}
	if p, ok := ctx.Value(pauserKey{}).(Pauser); ok {
		p.Pause(d)
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-wake:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

type labelKey struct{}

// WithLabel names the job ctx is given to ("fetch", "apply", ...), for
// executors that trace or inspect jobs.
func WithLabel(ctx context.Context, label string) context.Context {
	return context.WithValue(ctx, labelKey{}, label)
}

// Label is the name WithLabel gave the job, or "".
func Label(ctx context.Context) string {
	s, _ := ctx.Value(labelKey{}).(string)
	return s
}
