package memory

import (
	"context"
	"testing"
	"time"

	"github.com/drover-dev/drover/brokers"
)

// A stream fetch dates the next readable message (Result.Oldest): the
// time it was produced at, on the stream's clock; an open transaction's
// records are not readable, so they are not it.
func TestFetchOldestIsTheNextReadableMessage(t *testing.T) {
	s, c := newTestStream(t, 1)
	t0 := c.Now()
	produceN(t, s, "0", 2) // at t0
	c.Advance(5 * time.Second)
	produceN(t, s, "0", 1) // at t0+5s
	r, _ := s.Open(context.Background(), "0", brokers.Start{})
	for _, want := range []struct {
		n      int
		lag    int64
		oldest time.Time
	}{{1, 2, t0}, {1, 1, t0.Add(5 * time.Second)}, {5, 0, time.Time{}}} {
		res, err := r.Fetch(context.Background(), 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		if res.Lag != want.lag || !res.Oldest.Equal(want.oldest) {
			t.Fatalf("fetch: lag %d oldest %v, want lag %d oldest %v", res.Lag, res.Oldest, want.lag, want.oldest)
		}
		if want.n == 5 {
			break
		}
	}
	tx, err := s.BeginTx("0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Produce(brokers.Message{Value: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	res, err := r.Fetch(context.Background(), 10, 0)
	if err != nil || res.Lag != 0 || !res.Oldest.IsZero() {
		t.Fatalf("open transaction: %+v, %v; want lag 0, no oldest", res, err)
	}
}

// A queue receive dates the oldest message waiting for any slot: neither
// acked nor in flight (a nacked one waits too).
func TestReceiveOldestIsTheOldestWaiting(t *testing.T) {
	q, c := newTestQueue(t, 10*time.Second)
	t0 := c.Now()
	sendN(q, 1)
	c.Advance(3 * time.Second)
	sendN(q, 2)
	r := openReceiver(t, q, "slot-0")
	res, err := r.Receive(context.Background(), 1, 0)
	if err != nil || len(res.Messages) != 1 {
		t.Fatalf("receive: %+v, %v", res, err)
	}
	if res.Lag != 2 || !res.Oldest.Equal(t0.Add(3*time.Second)) {
		t.Fatalf("lag %d oldest %v, want 2 and t0+3s (the one in flight is not waiting)", res.Lag, res.Oldest)
	}
	if err := r.Nack(context.Background(), res.Messages, 0); err != nil {
		t.Fatal(err)
	}
	res, err = r.Receive(context.Background(), 3, 0)
	if err != nil || len(res.Messages) != 3 || res.Lag != 0 {
		t.Fatalf("receive all: %+v, %v", res, err)
	}
	if res.Messages[0].Time != t0 {
		t.Fatalf("first message stamped %v, want %v", res.Messages[0].Time, t0)
	}
}
