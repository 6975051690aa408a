package brokertest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/brokers"
)

// This file holds the helpers that an adapter's own tests share with the
// suite.

// Context is a context that ends with the test or after d.
func Context(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Poll is a Reader's Fetch or a Receiver's Receive: the stream and
// queue definitions check both calls the same way. Its name in failure
// messages is "fetch" or "receive".
type Poll func(ctx context.Context, max int, wait time.Duration) (brokers.Result, error)

// PollN calls p, for at most the messages still missing and with a wait
// of 1 s, until it has n messages; any error fails t (named "fetch" or
// "receive" by name, with how many had come). It returns the messages and
// the last result.
func PollN(t testing.TB, ctx context.Context, name string, p Poll, n int) ([]brokers.Message, brokers.Result) {
	t.Helper()
	var got []brokers.Message
	var last brokers.Result
	for len(got) < n {
		res, err := p(ctx, n-len(got), time.Second)
		if err != nil {
			t.Fatalf("%s after %d of %d: %v", name, len(got), n, err)
		}
		got = append(got, res.Messages...)
		last = res
	}
	return got, last
}

// Open calls open with Context(t, d), fails t when it fails (as "WHAT:
// err") and closes what it opened when t ends: a receiver, reader, queue
// or stream of an adapter's own tests.
func Open[C interface{ Close() error }](t testing.TB, d time.Duration, what string, open func(ctx context.Context) (C, error)) C {
	t.Helper()
	c, err := open(Context(t, d))
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Headers is m's headers as "key=value" pairs in their order, joined by
// commas, for a test to compare with what it sent.
func Headers(m brokers.Message) string {
	hs := make([]string, 0, len(m.Headers))
	for _, h := range m.Headers {
		hs = append(hs, h.Key+"="+string(h.Value))
	}
	return strings.Join(hs, ",")
}
