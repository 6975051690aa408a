package clock

import "time"

// Clock tells the time and runs functions later. Implementations are safe for
// concurrent use.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// AfterFunc calls f once, d from now, unless the returned Timer is
	// stopped first. f must not block.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc call.
type Timer interface {
	// Stop cancels the call; it reports whether the call was still pending.
	Stop() bool
}

// Real is the wall clock.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// AfterFunc is time.AfterFunc.
func (Real) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

var _ Clock = Real{}

// Labeler is implemented by clocks that can name their timers (the
// testkit's, which counts pending timers by label to find leaks).
type Labeler interface {
	AfterFuncLabeled(d time.Duration, label string, f func()) Timer
}

// AfterFunc calls c.AfterFunc, naming the timer label when c can.
func AfterFunc(c Clock, d time.Duration, label string, f func()) Timer {
	if l, ok := c.(Labeler); ok {
		return l.AfterFuncLabeled(d, label, f)
	}
	return c.AfterFunc(d, f)
}
