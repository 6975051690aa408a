package memory

import (
	"context"
	"time"

	"github.com/drover-dev/drover/internal/clock"
	"github.com/drover-dev/drover/internal/exec"
)

// waiter runs the waiting part of Fetch and Receive so that it behaves on
// both kinds of time:
//
//   - On the wall clock, exec.Wait sleeps and returns early when wake is
//     closed; the caller looks again and keeps waiting until its deadline.
//   - Under an executor that controls time, exec.Wait records the wait and
//     returns at once while the clock stands still; the caller looks once
//     more and returns, never spinning.
type waiter struct {
	clk      clock.Clock
	deadline time.Time
}

func newWaiter(clk clock.Clock, wait time.Duration) waiter {
	return waiter{clk: clk, deadline: clk.Now().Add(wait)}
}

// wait waits until the deadline, or at most next when next > 0, or until
// wake is closed. It reports whether the caller should look and then wait
// again: true when wake fired or the clock moved while the deadline is still
// ahead.
func (w waiter) wait(ctx context.Context, wake <-chan struct{}, next time.Duration) (again bool, err error) {
	now := w.clk.Now()
	d := w.deadline.Sub(now)
	if d <= 0 {
		return false, nil
	}
	if next > 0 && next < d {
		d = next
	}
	if err := exec.Wait(ctx, d, wake); err != nil {
		return false, err
	}
	select {
	case <-wake:
		return true, nil
	default:
	}
	after := w.clk.Now()
	return after.After(now) && after.Before(w.deadline), nil
}
