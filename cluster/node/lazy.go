package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/drover-dev/drover/brokers"
)

// A broker that cannot be reached when the node starts must not stop the
// node: Kafka's client connects on first use, and every other source
// behaves the same through lazy. Its adapter's constructor (which
// connects, and checks that the stream, queue or subscription exists) runs
// on the first call that needs the broker, and again on each later call
// until it succeeds. Those calls come from the runtime, which retries them
// with its own backoff and shows each failure in the tree: a stream's
// source is retrying with the broker's error (discovery), a queue's units
// are retrying with it (their open). The configuration is validated before
// (the adapters' Validate), so that a config error still fails Start.

// lazy opens a broker of type T on first use. Safe for concurrent use:
// one open at a time, the others wait for it (or for their ctx).
type lazy[T io.Closer] struct {
	what string // "nats stream", for messages
	open func(ctx context.Context) (T, error)
	log  *slog.Logger

	gate chan struct{} // held while an open runs

	life   context.Context // ends with Close: an open in flight is cancelled
	cancel context.CancelFunc

	mu      sync.Mutex
	val     T
	ok      bool
	closed  bool
	failing bool // the last open failed (logged once until it succeeds)
}

func newLazy[T io.Closer](what string, log *slog.Logger, open func(ctx context.Context) (T, error)) *lazy[T] {
	l := &lazy[T]{what: what, open: open, log: log, gate: make(chan struct{}, 1)}
	l.life, l.cancel = context.WithCancel(context.Background())
	return l
}

// get returns the opened broker, opening it now if it is not open yet.
// A failed open returns its error (a *brokers.Error keeps its Retryable).
func (l *lazy[T]) get(ctx context.Context, op string) (T, error) {
	var zero T
	if v, ok, err := l.current(op); ok || err != nil {
		return v, err
	}
	select {
	case l.gate <- struct{}{}:
	case <-ctx.Done():
		return zero, ctx.Err()
	case <-l.life.Done():
		return zero, closedErr(op)
	}
	defer func() { <-l.gate }()
	if v, ok, err := l.current(op); ok || err != nil {
		return v, err // opened while this call waited
	}
	octx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(l.life, cancel)
	began := time.Now()
	v, err := l.open(octx)
	stop()
	cancel()
	if err != nil {
		if l.life.Err() != nil {
			return zero, closedErr(op)
		}
		if ctx.Err() != nil {
			return zero, ctx.Err()
		}
		l.mu.Lock()
		first := !l.failing
		l.failing = true
		l.mu.Unlock()
		if first {
			l.log.Warn("cannot open the source's broker; the node stays up and tries again as its units retry",
				"broker", l.what, "took", time.Since(began).Round(time.Millisecond), "error", err)
		} else {
			l.log.Debug("open the source's broker", "broker", l.what, "error", err)
		}
		return zero, fmt.Errorf("open %s: %w", l.what, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		_ = v.Close()
		return zero, closedErr(op)
	}
	if l.failing {
		l.log.Info("source's broker reached", "broker", l.what)
	}
	l.val, l.ok, l.failing = v, true, false
	return v, nil
}

// current is the opened broker, if any; an error once closed.
func (l *lazy[T]) current(op string) (T, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var zero T
	if l.closed {
		return zero, false, closedErr(op)
	}
	return l.val, l.ok, nil
}

// Close closes the broker if it was opened, and makes every later call
// fail with brokers.ErrClosed; an open in flight is cancelled and what it
// opens is closed.
func (l *lazy[T]) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	v, ok := l.val, l.ok
	l.mu.Unlock()
	l.cancel()
	if ok {
		return v.Close()
	}
	return nil
}

func closedErr(op string) error { return &brokers.Error{Op: op, Err: brokers.ErrClosed} }

// lazyStream is a brokers.Stream opened on first use. It forwards
// brokers.Resolver (the streams it wraps, NATS and Kinesis, have it) and
// the seek interfaces brokers.Seeker (NATS) and brokers.FromSeeker
// (Kinesis), and brokers.StreamIdentifier; brokers.SubPositioner says
// whether the stream type it opens has sub-positions (Kinesis).
type lazyStream struct {
	l    *lazy[brokers.Stream]
	subs bool
}

var (
	_ brokers.Stream           = lazyStream{}
	_ brokers.Resolver         = lazyStream{}
	_ brokers.Seeker           = lazyStream{}
	_ brokers.FromSeeker       = lazyStream{}
	_ brokers.StreamIdentifier = lazyStream{}
	_ brokers.SubPositioner    = lazyStream{}
)

// SubPositions is the stream type's (brokers.SubPositioner), known before
// the stream is opened.
func (s lazyStream) SubPositions() bool { return s.subs }

func (s lazyStream) Partitions(ctx context.Context) ([]brokers.Partition, error) {
	st, err := s.l.get(ctx, "list partitions")
	if err != nil {
		return nil, err
	}
	return st.Partitions(ctx)
}

func (s lazyStream) Open(ctx context.Context, partition string, start brokers.Start) (brokers.Reader, error) {
	st, err := s.l.get(ctx, "open")
	if err != nil {
		return nil, err
	}
	return st.Open(ctx, partition, start)
}

// Resolve forwards to the stream's Resolve; a stream without one is read
// from its beginning for Earliest, as the runtime does for such streams.
func (s lazyStream) Resolve(ctx context.Context, partition string, mode brokers.StartMode) (brokers.Start, error) {
	st, err := s.l.get(ctx, "resolve")
	if err != nil {
		return brokers.Start{}, err
	}
	if r, ok := st.(brokers.Resolver); ok {
		return r.Resolve(ctx, partition, mode)
	}
	if mode == brokers.Earliest {
		return brokers.Start{Mode: brokers.Earliest}, nil
	}
	return brokers.Start{}, fmt.Errorf("%s cannot resolve a latest start", s.l.what)
}

// PositionAt forwards to the stream's; a stream without one is sought to
// the "@at:" marker its Open resolves.
func (s lazyStream) PositionAt(ctx context.Context, partition string, t time.Time) (brokers.Start, error) {
	st, err := s.l.get(ctx, "position at")
	if err != nil {
		return brokers.Start{}, err
	}
	if sk, ok := st.(brokers.Seeker); ok {
		return sk.PositionAt(ctx, partition, t)
	}
	return brokers.Start{At: t}, nil
}

// PositionFrom forwards to the stream's; for a stream without one, pos is
// read first after pos - 1 (brokers.StartFrom).
func (s lazyStream) PositionFrom(ctx context.Context, partition, pos string) (brokers.Start, error) {
	st, err := s.l.get(ctx, "position from")
	if err != nil {
		return brokers.Start{}, err
	}
	if fs, ok := st.(brokers.FromSeeker); ok {
		return fs.PositionFrom(ctx, partition, pos)
	}
	return brokers.StartFrom(pos), nil
}

// StreamID forwards to the stream's StreamID (brokers.StreamIdentifier);
// a stream that names no incarnation has "".
func (s lazyStream) StreamID(ctx context.Context, partition string) (string, error) {
	st, err := s.l.get(ctx, "stream id")
	if err != nil {
		return "", err
	}
	if si, ok := st.(brokers.StreamIdentifier); ok {
		return si.StreamID(ctx, partition)
	}
	return "", nil
}

func (s lazyStream) Close() error { return s.l.Close() }

// lazyQueue is a brokers.Queue opened on first use.
type lazyQueue struct{ l *lazy[brokers.Queue] }

var _ brokers.Queue = lazyQueue{}

func (q lazyQueue) Open(ctx context.Context, slot string) (brokers.Receiver, error) {
	qu, err := q.l.get(ctx, "open")
	if err != nil {
		return nil, err
	}
	return qu.Open(ctx, slot)
}

func (q lazyQueue) Close() error { return q.l.Close() }

// lazyOpenStream returns a Stream whose open is the adapter's constructor;
// subs: the adapter's positions have sub-positions (brokers.SubPositioner),
// known before the stream is opened.
func lazyOpenStream[S brokers.Stream](what string, log *slog.Logger, subs bool, open func(context.Context) (S, error)) Source {
	return Source{Stream: lazyStream{subs: subs, l: newLazy(what, log, func(ctx context.Context) (brokers.Stream, error) {
		s, err := open(ctx)
		if err != nil {
			return nil, err
		}
		return s, nil
	})}}
}

// lazyOpenQueue returns a Queue whose open is the adapter's constructor.
func lazyOpenQueue[Q brokers.Queue](what string, log *slog.Logger, open func(context.Context) (Q, error)) Source {
	return Source{Queue: lazyQueue{newLazy(what, log, func(ctx context.Context) (brokers.Queue, error) {
		q, err := open(ctx)
		if err != nil {
			return nil, err
		}
		return q, nil
	})}}
}
