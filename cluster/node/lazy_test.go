package node

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/memory"
)

// fakeQueue counts its Close calls.
type fakeQueue struct {
	brokers.Queue
	closed atomic.Int32
}

func (q *fakeQueue) Close() error { q.closed.Add(1); return nil }

func TestLazyOpensOnceAndRetriesAFailedOpen(t *testing.T) {
	var logs bytes.Buffer
	var calls atomic.Int32
	var fail atomic.Bool
	fail.Store(true)
	down := &brokers.Error{Op: "connect", Retryable: true, Err: errors.New("connection refused")}
	q := &fakeQueue{}
	l := newLazy("test queue", slog.New(slog.NewTextHandler(&logs, nil)), func(ctx context.Context) (brokers.Queue, error) {
		calls.Add(1)
		if fail.Load() {
			return nil, down
		}
		return q, nil
	})
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		_, err := l.get(ctx, "open")
		if !errors.Is(err, down) || !brokers.Retryable(err) || !strings.Contains(err.Error(), "open test queue: connect: connection refused") {
			t.Fatalf("failed open %d: %v (retryable %v)", i, err, brokers.Retryable(err))
		}
	}
	if n := calls.Load(); n != 3 {
		t.Fatalf("%d opens for 3 calls, want each call to try again", n)
	}
	if c := strings.Count(logs.String(), "cannot open the source's broker"); c != 1 {
		t.Errorf("the failure was logged %d times at WARN, want once:\n%s", c, logs.String())
	}

	fail.Store(false)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got, err := l.get(ctx, "open"); err != nil || got != brokers.Queue(q) {
				t.Errorf("get: %v %v", got, err)
			}
		}()
	}
	wg.Wait()
	if n := calls.Load(); n != 4 {
		t.Fatalf("%d opens, want one more after the failures, shared by every caller", n)
	}
	if !strings.Contains(logs.String(), "source's broker reached") {
		t.Errorf("no line when the broker was reached:\n%s", logs.String())
	}
	if err := l.Close(); err != nil || q.closed.Load() != 1 {
		t.Fatalf("Close: %v, queue closed %d times", err, q.closed.Load())
	}
	_ = l.Close()
	if q.closed.Load() != 1 {
		t.Errorf("closed twice")
	}
	if _, err := l.get(ctx, "open"); !errors.Is(err, brokers.ErrClosed) {
		t.Errorf("get after Close: %v", err)
	}
}

// Close while an open is in flight cancels it; what it opens anyway is
// closed, and the caller gets ErrClosed.
func TestLazyCloseDuringOpen(t *testing.T) {
	q := &fakeQueue{}
	entered := make(chan struct{})
	l := newLazy("test queue", slog.New(slog.DiscardHandler), func(ctx context.Context) (brokers.Queue, error) {
		close(entered)
		<-ctx.Done() // an adapter that ignores the cancel would return late; this one returns a broker
		return q, nil
	})
	res := make(chan error, 1)
	go func() {
		_, err := l.get(context.Background(), "open")
		res <- err
	}()
	<-entered
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-res:
		if !errors.Is(err, brokers.ErrClosed) {
			t.Errorf("get: %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("get did not return after Close")
	}
	if q.closed.Load() != 1 {
		t.Errorf("the broker opened during Close was closed %d times, want once", q.closed.Load())
	}
}

// A caller waiting for another's open gives up with its ctx.
func TestLazyWaitEndsWithCtx(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{})
	l := newLazy("test queue", slog.New(slog.DiscardHandler), func(ctx context.Context) (brokers.Queue, error) {
		close(entered)
		<-release
		return nil, errors.New("down")
	})
	defer l.Close()
	go func() { _, _ = l.get(context.Background(), "open") }()
	<-entered
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.get(ctx, "open"); !errors.Is(err, context.Canceled) {
		t.Errorf("get with a cancelled ctx while another opens: %v", err)
	}
	close(release)
}

// lazyStream forwards to the stream, Resolve included.
func TestLazyStreamForwards(t *testing.T) {
	ms, err := memory.NewStream(memory.StreamConfig{Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	src := lazyOpenStream("memory stream", slog.New(slog.DiscardHandler), true, func(context.Context) (*memory.Stream, error) { return ms, nil })
	defer src.Stream.Close()
	ctx := context.Background()
	parts, err := src.Stream.Partitions(ctx)
	if err != nil || len(parts) != 2 {
		t.Fatalf("Partitions: %v %v", parts, err)
	}
	r, ok := src.Stream.(brokers.Resolver)
	if !ok {
		t.Fatal("not a Resolver")
	}
	if _, err := r.Resolve(ctx, parts[0].ID, brokers.Latest); err != nil {
		t.Errorf("Resolve latest: %v", err)
	}
	// the seek interfaces: the memory stream's PositionAt answers a
	// position (a wrapper that hid it would give the @at marker)
	if _, err := ms.Produce(parts[0].ID, brokers.Message{Time: time.Unix(100, 0)}, brokers.Message{Time: time.Unix(200, 0)}); err != nil {
		t.Fatal(err)
	}
	sk, ok := src.Stream.(brokers.Seeker)
	if !ok {
		t.Fatal("not a Seeker")
	}
	if st, err := sk.PositionAt(ctx, parts[0].ID, time.Unix(150, 0)); err != nil || st != (brokers.Start{After: "0"}) {
		t.Errorf("PositionAt: %+v, %v; want after 0", st, err)
	}
	if st, err := brokers.SeekStart(ctx, src.Stream, parts[0].ID, brokers.SeekTarget{From: "1"}); err != nil || st != (brokers.Start{After: "0"}) {
		t.Errorf("seek to position 1: %+v, %v; want after 0", st, err)
	}
	// sub-positions: as the source says, before the stream is opened
	if st, err := brokers.SeekStart(ctx, src.Stream, parts[0].ID, brokers.SeekTarget{From: "1/2"}); err != nil || st != (brokers.Start{After: "1/1"}) {
		t.Errorf("seek to sub-position 1/2: %+v, %v; want after 1/1", st, err)
	}
	plain := lazyOpenStream("plain stream", slog.New(slog.DiscardHandler), false, func(context.Context) (*memory.Stream, error) { return ms, nil })
	defer plain.Stream.Close()
	if _, err := brokers.SeekStart(ctx, plain.Stream, parts[0].ID, brokers.SeekTarget{From: "1/2"}); !errors.Is(err, brokers.ErrBadSeek) {
		t.Errorf("seek to sub-position 1/2 on a source declared without them: %v, want ErrBadSeek", err)
	}
	rd, err := src.Stream.Open(ctx, parts[0].ID, brokers.Start{Mode: brokers.Earliest})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	_ = rd.Close()
}
