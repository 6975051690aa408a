package memory

import (
	"context"
	"testing"

	"github.com/drover-dev/drover/brokers"
)

// wakeCount arranges a Wake on r and counts its calls.
func wakeCount(t *testing.T, r brokers.Reader) (calls *int, cancel func()) {
	t.Helper()
	w, ok := r.(brokers.Waker)
	if !ok {
		t.Fatalf("%T is no brokers.Waker", r)
	}
	calls = new(int)
	return calls, w.Wake(func() { *calls++ })
}

func TestWakeOnProduce(t *testing.T) {
	s, _ := newTestStream(t, 2)
	r, err := s.Open(context.Background(), "0", brokers.Start{})
	if err != nil {
		t.Fatal(err)
	}
	calls, _ := wakeCount(t, r)
	if *calls != 0 {
		t.Fatalf("woken %d times on an empty partition", *calls)
	}
	produceN(t, s, "1", 1) // another partition
	if *calls != 0 {
		t.Fatalf("woken %d times by another partition", *calls)
	}
	produceN(t, s, "0", 2)
	produceN(t, s, "0", 1)
	if *calls != 1 {
		t.Fatalf("woken %d times, want once", *calls)
	}
	// readable now: a new arrangement is called at once
	again, _ := wakeCount(t, r)
	if *again != 1 {
		t.Fatalf("a Wake with messages waiting was called %d times, want at once", *again)
	}
	if res, err := r.Fetch(context.Background(), 10, 0); err != nil || len(res.Messages) != 3 {
		t.Fatalf("fetch = %v, %v", positions(res.Messages), err)
	}
	// caught up: waits again
	third, _ := wakeCount(t, r)
	if *third != 0 {
		t.Fatalf("a caught-up reader was woken at once")
	}
}

func TestWakeCancel(t *testing.T) {
	s, _ := newTestStream(t, 1)
	r, _ := s.Open(context.Background(), "0", brokers.Start{})
	calls, cancel := wakeCount(t, r)
	cancel()
	cancel() // twice is harmless
	produceN(t, s, "0", 1)
	if *calls != 0 {
		t.Fatalf("a cancelled Wake was called %d times", *calls)
	}
}

// A transaction holds readers back: its records wake nobody, its commit
// does; so does an abort (spuriously: nothing to read but the marker).
func TestWakeTransactions(t *testing.T) {
	s, _ := newTestStream(t, 1)
	r, _ := s.Open(context.Background(), "0", brokers.Start{})
	tx, err := s.BeginTx("0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Produce(brokers.Message{Value: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	calls, _ := wakeCount(t, r)
	if *calls != 0 {
		t.Fatalf("woken by records of an open transaction")
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if *calls != 1 {
		t.Fatalf("the commit woke %d times, want once", *calls)
	}
}

// Whatever a Fetch would report at once wakes too: a closed reader, a
// split partition (End), a recreated stream.
func TestWakeOnEndsAndErrors(t *testing.T) {
	for name, do := range map[string]func(*Stream, brokers.Reader) error{
		"reader closed": func(_ *Stream, r brokers.Reader) error { return r.Close() },
		"stream closed": func(s *Stream, _ brokers.Reader) error { return s.Close() },
		"split":         func(s *Stream, _ brokers.Reader) error { _, err := s.Split("0"); return err },
		"recreated":     func(s *Stream, _ brokers.Reader) error { return s.Recreate() },
	} {
		t.Run(name, func(t *testing.T) {
			s, _ := newTestStream(t, 1)
			r, _ := s.Open(context.Background(), "0", brokers.Start{})
			calls, _ := wakeCount(t, r)
			if err := do(s, r); err != nil {
				t.Fatal(err)
			}
			if *calls != 1 {
				t.Fatalf("woken %d times, want once", *calls)
			}
			after, _ := wakeCount(t, r)
			if *after != 1 {
				t.Fatalf("a Wake after it was not called at once")
			}
		})
	}
}

// An injected fetch failure is something a Fetch returns at once: it wakes.
func TestWakeOnInjectedFetchFailure(t *testing.T) {
	for _, op := range []string{OpFetch, OpAny} {
		s, _ := newTestStream(t, 2)
		r, _ := s.Open(context.Background(), "1", brokers.Start{})
		calls, _ := wakeCount(t, r)
		s.FailNext(OpReceive, 1, nil) // not a stream's
		if *calls != 0 {
			t.Fatalf("woken by a receive failure")
		}
		s.FailNext(op, 1, nil)
		if *calls != 1 {
			t.Fatalf("FailNext(%s) woke %d times, want once", op, *calls)
		}
		if _, err := r.Fetch(context.Background(), 10, 0); err == nil {
			t.Fatalf("no injected error")
		}
	}
}
