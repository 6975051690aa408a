package exec

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// waitFor polls cond until it holds or 10 s passed.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10 s: %s", what)
		}
		time.Sleep(time.Millisecond) // polling a condition with a deadline
	}
}

// TestPoolReusesAWaitingGoroutine: jobs handed one after the other, each
// after the one before finished, all run on the goroutine the first one
// started.
func TestPoolReusesAWaitingGoroutine(t *testing.T) {
	p := NewPool(time.Minute)
	defer p.Close()
	var ran atomic.Int64
	for i := range 50 {
		done := make(chan struct{})
		p.Go(func() { ran.Add(1); close(done) })
		<-done
		waitFor(t, "the goroutine waits for work again", func() bool { return p.waiting() == 1 })
		if got := p.started.Load(); got != 1 {
			t.Fatalf("job %d: %d goroutines started, want the first one reused", i, got)
		}
	}
	if ran.Load() != 50 {
		t.Fatalf("ran %d jobs of 50", ran.Load())
	}
}

// TestPoolNeverBlocks: while every goroutine of the pool is busy, Go starts
// another; the pool has no bound.
func TestPoolNeverBlocks(t *testing.T) {
	p := NewPool(time.Minute)
	defer p.Close()
	release := make(chan struct{})
	var running atomic.Int64
	for range 20 {
		p.Go(func() { running.Add(1); <-release })
	}
	waitFor(t, "20 blocked jobs running at once", func() bool { return running.Load() == 20 })
	if got := p.started.Load(); got != 20 {
		t.Fatalf("%d goroutines started for 20 blocked jobs", got)
	}
	close(release)
	waitFor(t, "20 goroutines waiting for work", func() bool { return p.waiting() == 20 })
}

// TestPoolGoroutinesExit: a goroutine that waited keep exits; Close makes
// the waiting ones exit at once, and Go after Close still runs its job.
func TestPoolGoroutinesExit(t *testing.T) {
	short := NewPool(5 * time.Millisecond)
	done := make(chan struct{})
	short.Go(func() { close(done) })
	<-done
	waitFor(t, "the goroutine waits for work", func() bool { return short.waiting() == 1 })
	waitFor(t, "the idle goroutine exits after keep", func() bool { return short.waiting() == 0 })
	if got := short.started.Load(); got != 1 {
		t.Fatalf("%d goroutines started for one job", got)
	}

	long := NewPool(time.Hour)
	for range 3 {
		d := make(chan struct{})
		long.Go(func() { close(d) })
		<-d
	}
	waitFor(t, "a goroutine waits for work", func() bool { return long.waiting() >= 1 })
	long.Close()
	waitFor(t, "Close makes the waiting goroutines exit", func() bool { return long.waiting() == 0 })
	after := make(chan struct{})
	long.Go(func() { close(after) })
	select {
	case <-after:
	case <-time.After(10 * time.Second):
		t.Fatal("a job handed to a closed pool did not run")
	}
}

// TestPoolKeepsOnlyWhatRunsAtOnce: after a burst of 20 jobs at once, jobs
// one at a time, far more often than once per keep, reuse the goroutine
// that waited least, and the other 19 exit after keep. A pool that handed
// each job to the goroutine that waited longest kept all 20 alive.
func TestPoolKeepsOnlyWhatRunsAtOnce(t *testing.T) {
	p := NewPool(20 * time.Millisecond)
	defer p.Close()
	release := make(chan struct{})
	var running atomic.Int64
	for range 20 {
		p.Go(func() { running.Add(1); <-release })
	}
	waitFor(t, "20 blocked jobs running at once", func() bool { return running.Load() == 20 })
	close(release)
	waitFor(t, "20 goroutines waiting for work", func() bool { return p.waiting() == 20 })
	deadline := time.Now().Add(10 * time.Second)
	for p.waiting() > 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines still wait after 10 s of one job at a time", p.waiting())
		}
		done := make(chan struct{})
		p.Go(func() { close(done) })
		<-done
	}
	if got := p.started.Load(); got != 20 {
		t.Fatalf("%d goroutines started, want the burst's 20 reused", got)
	}
}

// TestGoroutinesOnAPool: the executor runs its jobs on the pool it is
// given (left open by Wait) or on one of its own (closed by Wait), and
// Dispatcher schedules on its pool with protoactor's throughput by
// default.
func TestGoroutinesOnAPool(t *testing.T) {
	shared := NewPool(time.Minute)
	defer shared.Close()
	g := &Goroutines{Pool: shared}
	got := make(chan any, 1)
	g.Go(context.Background(), func(context.Context) any { return 7 }, func(v any) { got <- v })
	if v := <-got; v != 7 {
		t.Fatalf("delivered %v", v)
	}
	g.Wait()
	if shared.started.Load() != 1 {
		t.Fatalf("the job did not run on the pool given: %d started there", shared.started.Load())
	}
	waitFor(t, "the given pool's goroutine waits for work after Wait", func() bool { return shared.waiting() == 1 })

	var own Goroutines
	own.Go(context.Background(), func(context.Context) any { return nil }, func(any) {})
	own.Wait()
	waitFor(t, "the executor's own pool is closed by Wait", func() bool { return own.own.waiting() == 0 })
	own.own.mu.Lock()
	closed := own.own.closed
	own.own.mu.Unlock()
	if !closed {
		t.Fatal("Wait left the executor's own pool open")
	}

	d := Dispatcher{Pool: shared}
	if d.Throughput() != DefaultMessages {
		t.Fatalf("throughput %d, want %d", d.Throughput(), DefaultMessages)
	}
	ran := make(chan struct{})
	d.Schedule(func() { close(ran) })
	<-ran
	if shared.started.Load() != 1 {
		t.Fatalf("the mailbox run did not reuse the pool's goroutine: %d started", shared.started.Load())
	}
}

// deep uses about n KB of stack.
//
//go:noinline
func deep(n int) byte {
	var buf [1024]byte
	buf[n%1024] = byte(n)
	if n == 0 {
		return buf[0]
	}
	return deep(n-1) + buf[(n+1)%1024]
}

var sink atomic.Int64

// BenchmarkDeepJob runs a job that needs 64 KB of stack (a store call's
// depth) on a new goroutine each time, as protoactor's dispatcher and the
// executor did, and on the pool.
//
//	go test -run '^$' -bench DeepJob ./internal/exec/
func BenchmarkDeepJob(b *testing.B) {
	job := func(done chan struct{}) func() {
		return func() { sink.Add(int64(deep(64))); done <- struct{}{} }
	}
	b.Run("go", func(b *testing.B) {
		done := make(chan struct{})
		f := job(done)
		for b.Loop() {
			go f()
			<-done
		}
	})
	b.Run("pool", func(b *testing.B) {
		p := NewPool(0)
		defer p.Close()
		done := make(chan struct{})
		f := job(done)
		for b.Loop() {
			p.Go(f)
			<-done
		}
	})
}
