package kafka

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func newTestBuf() *partBuf {
	return &partBuf{p: 0, end: -1, limit: 100, notify: make(chan struct{}, 1)}
}

// A cancelled wake-up is never called; the others are, once, when the
// empty buffer receives something; a buffer that holds something wakes at
// once.
func TestBufferWake(t *testing.T) {
	b := newTestBuf()
	calls := map[string]int{}
	cancelA := b.wake(func() { calls["a"]++ }, false)
	b.wake(func() { calls["b"]++ }, false)
	cancelA()
	wakes := b.push([]*kgo.Record{{Offset: 0}}, nil, 1, nil)
	for _, f := range wakes {
		f()
	}
	if calls["a"] != 0 || calls["b"] != 1 || len(wakes) != 1 {
		t.Fatalf("calls %v from %d wake-ups, want b once and a never", calls, len(wakes))
	}
	select {
	case <-b.notify:
	default:
		t.Fatal("a push into the empty buffer did not notify")
	}
	if wakes := b.push([]*kgo.Record{{Offset: 1}}, nil, 2, nil); len(wakes) != 0 {
		t.Fatalf("a push into a buffer that holds records woke %d", len(wakes))
	}
	b.wake(func() { calls["c"]++ }, false)
	if calls["c"] != 1 {
		t.Fatal("wake on a buffer that holds records was not called at once")
	}
	empty := newTestBuf()
	empty.wake(func() { calls["d"]++ }, true)
	if calls["d"] != 1 {
		t.Fatal("wake on a reader with an answer was not called at once")
	}
	empty.wake(func() { calls["e"]++ }, false)
	for _, f := range empty.stop(false) {
		f()
	}
	if calls["e"] != 1 {
		t.Fatal("stop did not call the pending wake-up")
	}
}

// Errors the client reports again and again for a partition nobody
// fetches do not pile up: a run of them keeps one, a position error first.
func TestBufferErrorsCoalesce(t *testing.T) {
	b := newTestBuf()
	first, second := errors.New("first"), errors.New("second")
	b.push(nil, first, -1, nil)
	b.push(nil, second, -1, nil)
	if len(b.entries) != 1 || b.entries[0].err != second {
		t.Fatalf("entries %+v, want the latest error only", b.entries)
	}
	b.push(nil, kerr.OffsetOutOfRange, -1, nil)
	b.push(nil, first, -1, nil)
	if len(b.entries) != 1 || !errors.Is(b.entries[0].err, kerr.OffsetOutOfRange) {
		t.Fatalf("entries %+v, want the position error kept", b.entries)
	}
	b.push([]*kgo.Record{{Offset: 3}}, first, 4, nil)
	if len(b.entries) != 3 || b.entries[1].rec == nil || b.entries[2].err != first || b.end != 4 {
		t.Fatalf("entries %+v end %d, want error, record, error; end 4", b.entries, b.end)
	}
}
