package brokertest

import (
	"context"
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
