package memory

// Clients: one node's view of a Stream or a Queue, released on its own.

import (
	"context"
	"time"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/internal/open"
)

// StreamClient is one client's view of a Stream, as a node connected to a
// real broker would have: Close releases only the readers opened through
// it, and the stream goes on for everyone else. It implements
// brokers.Stream; faults injected on the Stream apply to it.
type StreamClient struct {
	s *Stream
	// Guarded by s.mu. readers are the open readers of this client, whose
	// partitions Close wakes.
	readers map[*Reader]struct{}
	closed  bool
}

var (
	_ brokers.Stream   = (*StreamClient)(nil)
	_ brokers.Resolver = (*StreamClient)(nil)
)

// NewClient returns a new client of s.
func (s *Stream) NewClient() *StreamClient {
	return &StreamClient{s: s, readers: make(map[*Reader]struct{})}
}

// Partitions is Stream.Partitions.
func (c *StreamClient) Partitions(ctx context.Context) ([]brokers.Partition, error) {
	c.s.mu.Lock()
	closed := c.closed
	c.s.mu.Unlock()
	if closed {
		return nil, &brokers.Error{Op: OpPartitions, Err: brokers.ErrClosed}
	}
	return c.s.Partitions(ctx)
}

// Open is Stream.Open; the reader is closed with the client.
func (c *StreamClient) Open(ctx context.Context, partition string, start brokers.Start) (brokers.Reader, error) {
	return open.Reader(c.s.openReader(ctx, c, partition, start))
}

// Resolve is Stream.Resolve.
func (c *StreamClient) Resolve(ctx context.Context, partition string, mode brokers.StartMode) (brokers.Start, error) {
	return c.s.resolve(ctx, c, partition, mode)
}

// SubPositions is Stream.SubPositions.
func (c *StreamClient) SubPositions() bool { return true }

// Close closes the client and its readers; waiting fetches return
// brokers.ErrClosed. Closing twice is harmless.
func (c *StreamClient) Close() error {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	for r := range c.readers {
		r.p.notify()
	}
	clear(c.readers)
	return nil
}

// QueueClient is one client's view of a Queue, as a node connected to a
// real broker would have: Close releases only the receivers opened through
// it (their messages stay in flight until their deadline), and the queue
// goes on for everyone else. It implements brokers.Queue.
type QueueClient struct {
	q      *Queue
	closed bool // guarded by q.mu
}

var _ brokers.Queue = (*QueueClient)(nil)

// NewClient returns a new client of q.
func (q *Queue) NewClient() *QueueClient {
	return &QueueClient{q: q}
}

// Open is Queue.Open; the receiver is closed with the client.
func (c *QueueClient) Open(ctx context.Context, slot string) (brokers.Receiver, error) {
	return open.Receiver(c.q.openReceiver(ctx, c, slot))
}

// Close closes the client and its receivers; waiting receives return
// brokers.ErrClosed. Closing twice is harmless.
func (c *QueueClient) Close() error {
	c.q.mu.Lock()
	defer c.q.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	c.q.notifyLocked()
	return nil
}

// PositionAt is Stream.PositionAt.
func (c *StreamClient) PositionAt(ctx context.Context, partition string, t time.Time) (brokers.Start, error) {
	return c.s.positionAt(ctx, c, partition, t)
}
