package brokertest

import (
	"testing"
	"time"

	"github.com/drover-dev/drover/brokers"
)

// This file holds the checks that the stream and queue definitions make
// the same way.

// wantClosed fails t unless err is ErrClosed (and not retryable); what
// names the call.
func wantClosed(t *testing.T, what string, err error) {
	t.Helper()
	if !isClosedErr(err) {
		t.Fatalf("%s: %v, want ErrClosed", what, err)
	}
}

// pollClosed checks that p (max 1, no wait) fails with ErrClosed.
func pollClosed(t *testing.T, what string, p Poll) {
	t.Helper()
	_, err := p(Context(t, opTimeout), 1, 0)
	wantClosed(t, what, err)
}

// closeEndsPoll checks that close ends a call of p (name "fetch" or
// "receive") waiting on an empty partition or queue (where) at once, with
// ErrClosed.
func closeEndsPoll(t *testing.T, name, where string, p Poll, close func() error) {
	t.Helper()
	var perr error
	done := async(func() { _, perr = p(Context(t, time.Minute+opTimeout), 10, time.Minute) })
	mustStillRun(t, done, "a "+name+" on an empty "+where)
	if err := close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	waitDone(t, done, prompt, "a "+name+" in flight during Close")
	wantClosed(t, name+" in flight during Close", perr)
}

// stopServer stops the fixture's server and returns the function that
// starts it again; when the test ends before that, its cleanup starts
// the server.
func stopServer(t *testing.T, f any) (start func()) {
	rs := f.(ServerRestarter)
	rs.StopServer(t)
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			rs.StartServer(t)
		}
	})
	return func() {
		rs.StartServer(t)
		restarted = true
	}
}

// ackEventually acks msgs until an ack succeeds, within readTimeout: a
// retryable error is the server coming back (after names the event), any
// other fails t.
func ackEventually(t *testing.T, r brokers.Receiver, msgs []brokers.Message, after string) {
	t.Helper()
	eventually(t, readTimeout, "ack after the "+after+" kept failing", func() bool {
		err := r.Ack(Context(t, opTimeout), msgs)
		if err != nil && !brokers.Retryable(err) {
			t.Fatalf("ack after the %s: %v", after, err)
		}
		return err == nil
	})
}

// checkRedelivery checks that again is first delivered again: the same
// ID, and more Deliveries where the adapter counts them.
func checkRedelivery(t *testing.T, first, again brokers.Message) {
	t.Helper()
	if again.ID != first.ID {
		t.Fatalf("redelivered %+v, want %+v", again, first)
	}
	if again.Deliveries != 0 && again.Deliveries <= first.Deliveries {
		t.Fatalf("redelivery has Deliveries %d after %d", again.Deliveries, first.Deliveries)
	}
}

// readingStream is a stream of one partition p holding m-0 … m-(produced-1)
// and a reader r from Earliest that has read the first read of them.
func readingStream(t *testing.T, h StreamHarness, produced, read int, needs ...Capability) (f StreamFixture, s brokers.Stream, p string, r brokers.Reader) {
	t.Helper()
	f, s, ids := newStream(t, h, 1, needs...)
	p = ids[0]
	produce(t, f, p, numbered("m", 0, produced)...)
	r = openReader(t, s, p, earliest)
	fetchN(t, r, read, readTimeout, false)
	return f, s, p, r
}

// receivingQueue is a queue and its receiver r on slot-0 that has
// received and acked m-0.
func receivingQueue(t *testing.T, h QueueHarness, needs ...Capability) (f QueueFixture, q brokers.Queue, r brokers.Receiver) {
	t.Helper()
	f, q = newQueue(t, h, needs...)
	send(t, f, numbered("m", 0, 1)...)
	r = openRecv(t, q, "slot-0")
	ack(t, r, receiveN(t, r, 1, readTimeout, false))
	return f, q, r
}
