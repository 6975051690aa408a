package brokertest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/drover-dev/drover/brokers"
)

// Timeouts of the suite. They bound waits on the wall clock; a definition
// that passes never waits for them to expire except where it says so.
const (
	// opTimeout bounds one call that should answer at once.
	opTimeout = 15 * time.Second
	// readTimeout bounds reading messages that were produced.
	readTimeout = 30 * time.Second
	// stillBlocked is how long a call that should be waiting must not
	// return.
	stillBlocked = 300 * time.Millisecond
	// prompt bounds how long a cancelled or closed call may take to return.
	prompt = 5 * time.Second
)

func requireCaps(t *testing.T, fixture any, needs []Capability) {
	t.Helper()
	for _, c := range needs {
		if !has(fixture, c) {
			t.Fatalf("the plan runs this definition but the fixture %T is not a %s: implement it or leave the definition out with a reason", fixture, c)
		}
	}
}

func values(msgs []brokers.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.Value)
	}
	return out
}

func numbered(prefix string, from, n int) []brokers.Message {
	out := make([]brokers.Message, n)
	for i := range out {
		out[i] = brokers.Message{Key: []byte(fmt.Sprintf("k-%d", from+i)), Value: []byte(fmt.Sprintf("%s-%d", prefix, from+i))}
	}
	return out
}

func wantValues(prefix string, from, n int) []string {
	return values(numbered(prefix, from, n))
}

// fetchN fetches until it has n messages or timeout passes; see collect.
func fetchN(t *testing.T, r brokers.Reader, n int, timeout time.Duration, tolerateRetryable bool) []brokers.Message {
	t.Helper()
	return collect(t, "fetch", r.Fetch, n, timeout, tolerateRetryable)
}

// collect calls p until it has n messages or timeout passes. With
// tolerateRetryable, retryable errors are logged and calling goes on (a
// server coming back); any other error fails t.
func collect(t *testing.T, name string, p Poll, n int, timeout time.Duration, tolerateRetryable bool) []brokers.Message {
	t.Helper()
	ctx := Context(t, timeout)
	var got []brokers.Message
	for len(got) < n {
		res, err := p(ctx, n-len(got), time.Second)
		switch {
		case err != nil && ctx.Err() != nil:
			t.Fatalf("after %v got %d of %d messages: %v", timeout, len(got), n, values(got))
		case err != nil && tolerateRetryable && brokers.Retryable(err):
			t.Logf("%s: retryable error while recovering: %v", name, err)
			continue
		case err != nil:
			t.Fatalf("%s: %v (retryable %v)", name, err, brokers.Retryable(err))
		}
		if len(res.Messages) > n-len(got) {
			t.Fatalf("%s with max %d returned %d messages", name, n-len(got), len(res.Messages))
		}
		got = append(got, res.Messages...)
	}
	return got
}

// checkMaxWait checks that p on an empty partition or queue waits about
// its wait and no longer, for a wait of 1 s and of 0.
func checkMaxWait(t *testing.T, name string, p Poll) {
	t.Helper()
	for _, wait := range []time.Duration{time.Second, 0} {
		start := time.Now()
		res, err := p(Context(t, wait+opTimeout), 10, wait)
		el := time.Since(start)
		if err != nil || len(res.Messages) != 0 {
			t.Fatalf("empty %s = %+v, %v", name, res, err)
		}
		if el > wait+3*time.Second {
			t.Fatalf("%s with wait %v took %v", name, wait, el)
		}
		if el < wait/2 {
			t.Fatalf("%s with wait %v returned empty after %v: callers would spin", name, wait, el)
		}
	}
}

// checkServerDown checks that p, with the server stopped, returns in time
// with nothing or a retryable error.
func checkServerDown(t *testing.T, name string, p Poll) {
	t.Helper()
	start := time.Now()
	res, err := p(Context(t, opTimeout), 10, time.Second)
	if el := time.Since(start); el > time.Second+prompt {
		t.Fatalf("%s with the server down took %v", name, el)
	}
	if err != nil && !brokers.Retryable(err) {
		t.Fatalf("%s with the server down: %v, want nothing or a retryable error", name, err)
	}
	if len(res.Messages) > 0 {
		t.Fatalf("%s with the server down returned %v", name, values(res.Messages))
	}
	t.Logf("%s with the server down: %v", name, err)
}

// expectNothing fetches once with wait and fails when a message comes.
func expectNothing(t *testing.T, r brokers.Reader, wait time.Duration) {
	t.Helper()
	res, err := r.Fetch(Context(t, wait+opTimeout), 10, wait)
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	if len(res.Messages) > 0 {
		t.Fatalf("fetch returned %v, want nothing", values(res.Messages))
	}
}

func checkPositionsIncrease(t *testing.T, msgs []brokers.Message) {
	t.Helper()
	for i := 1; i < len(msgs); i++ {
		if brokers.ComparePositions(msgs[i-1].Position, msgs[i].Position) >= 0 {
			t.Fatalf("position %q at %d is not after %q", msgs[i].Position, i, msgs[i-1].Position)
		}
	}
}

// eventually polls cond every interval until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", timeout, what)
		}
		<-tick.C
	}
}

// async runs f on a goroutine and returns a channel closed when it is done.
func async(f func()) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	return done
}

// mustStillRun fails t when done closes within stillBlocked.
func mustStillRun(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
		t.Fatalf("%s returned at once, want it to wait", what)
	case <-time.After(stillBlocked):
	}
}

// waitDone fails t when done does not close within d.
func waitDone(t *testing.T, done <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
	}
}

func isClosedErr(err error) bool {
	return errors.Is(err, brokers.ErrClosed) && !brokers.Retryable(err)
}

// verifyNoLeaks waits up to 10 s for every goroutine started since ignore
// was taken (except those the harness names) to end.
func verifyNoLeaks(t *testing.T, h any, ignore goleak.Option) {
	t.Helper()
	opts := []goleak.Option{ignore}
	if li, ok := h.(LeakIgnorer); ok {
		opts = append(opts, li.IgnoreGoroutines()...)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := goleak.Find(opts...)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines left after Close: %v", err)
		}
	}
}
