package storetest

import (
	"slices"
	"sync"
	"time"

	"github.com/drover-dev/drover/internal/clock"
)

// Clock is a manual clock.Clock for stores that take an injected clock: time
// moves only when Advance or Set moves it, and AfterFunc callbacks run on
// the goroutine that moves it, in time order.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	seq    int
	timers []*manualTimer
}

// NewClock returns a Clock reading start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

var _ clock.Clock = (*Clock)(nil)

// Now implements clock.Clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d and runs the callbacks that fall due.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	to := c.now.Add(d)
	c.mu.Unlock()
	c.Set(to)
}

// Set moves the clock to t (never backwards) and runs the callbacks that
// fall due, each at its own time.
func (c *Clock) Set(t time.Time) {
	for {
		c.mu.Lock()
		if len(c.timers) == 0 || c.timers[0].at.After(t) {
			if t.After(c.now) {
				c.now = t
			}
			c.mu.Unlock()
			return
		}
		next := c.timers[0]
		c.timers = c.timers[1:]
		if next.at.After(c.now) {
			c.now = next.at
		}
		c.mu.Unlock()
		next.f()
	}
}

// AfterFunc implements clock.Clock.
func (c *Clock) AfterFunc(d time.Duration, f func()) clock.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &manualTimer{c: c, at: c.now.Add(d), seq: c.seq, f: f}
	i, _ := slices.BinarySearchFunc(c.timers, t, func(a, b *manualTimer) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.seq - b.seq
	})
	c.timers = slices.Insert(c.timers, i, t)
	return t
}

type manualTimer struct {
	c   *Clock
	at  time.Time
	seq int
	f   func()
}

// Stop implements clock.Timer.
func (t *manualTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	i := slices.Index(t.c.timers, t)
	if i < 0 {
		return false
	}
	t.c.timers = slices.Delete(t.c.timers, i, i+1)
	return true
}
