package memory

import (
	"context"
	"sync"
	"time"

	"github.com/drover-dev/drover/internal/clock"
	"github.com/drover-dev/drover/internal/exec"
)

// fakeClock is a manual clock for tests. AfterFunc is not used by the
// package; it is implemented only to satisfy clock.Clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type stoppedTimer struct{}

func (stoppedTimer) Stop() bool { return false }

func (c *fakeClock) AfterFunc(time.Duration, func()) clock.Timer { return stoppedTimer{} }

// virtualPauser stands in for the testkit's executor: it records each wait
// and, when advance is set, moves the clock by it (the job's result arrives
// that much later).
type virtualPauser struct {
	mu      sync.Mutex
	clock   *fakeClock
	advance bool
	waits   []time.Duration
}

func (p *virtualPauser) Pause(d time.Duration) {
	p.mu.Lock()
	p.waits = append(p.waits, d)
	p.mu.Unlock()
	if p.advance {
		p.clock.Advance(d)
	}
}

func (p *virtualPauser) Waits() []time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]time.Duration(nil), p.waits...)
}

// virtualCtx returns a context whose waits are recorded by a pauser instead
// of sleeping.
func virtualCtx(c *fakeClock, advance bool) (context.Context, *virtualPauser) {
	p := &virtualPauser{clock: c, advance: advance}
	return exec.WithPauser(context.Background(), p), p
}
