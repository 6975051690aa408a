package memory

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/drover-dev/drover/actors/clock"
	"github.com/drover-dev/drover/brokers"
)

// StreamConfig configures a Stream. The zero value is a one-partition
// stream on the wall clock.
type StreamConfig struct {
	// Partitions is the number of partitions at start, named "0".."n-1".
	// 0 means 1.
	Partitions int
	// Clock stamps produced messages that have no Time. nil means
	// clock.Real{}.
	Clock clock.Clock
}

// Validate reports a config that cannot be used.
func (c StreamConfig) Validate() error {
	if c.Partitions < 0 {
		return fmt.Errorf("memory stream: partitions: %d is negative", c.Partitions)
	}
	return nil
}

func (c StreamConfig) withDefaults() StreamConfig {
	if c.Partitions == 0 {
		c.Partitions = 1
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	return c
}

// Stream is an in-memory partitioned log. It implements brokers.Stream and
// is safe for concurrent use.
type Stream struct {
	clock clock.Clock

	// testHookWait, when set, is called before a Fetch starts waiting.
	testHookWait func()

	mu     sync.Mutex
	parts  []*partition // in creation order
	byID   map[string]*partition
	faults faults
	closed bool
}

var _ brokers.Stream = (*Stream)(nil)

type partition struct {
	id      string
	parents []string
	base    int64             // offset of msgs[0]; offsets below were trimmed
	msgs    []brokers.Message // offsets base, base+1, ...
	closed  bool              // split or merged: no more messages
	// wake is closed and replaced whenever a reader waiting on this
	// partition has something new to look at (messages, closing, Close).
	wake chan struct{}
}

func (p *partition) end() int64 { return p.base + int64(len(p.msgs)) }

func (p *partition) notify() {
	close(p.wake)
	p.wake = make(chan struct{})
}

// NewStream returns a stream with cfg.Partitions empty partitions.
func NewStream(cfg StreamConfig) (*Stream, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	s := &Stream{
		clock: cfg.Clock,
		byID:  make(map[string]*partition),
	}
	s.addLocked(cfg.Partitions, nil)
	return s, nil
}

// addLocked creates n open partitions with the given parents and returns
// their ids.
func (s *Stream) addLocked(n int, parents []string) []string {
	ids := make([]string, 0, n)
	for range n {
		id := strconv.Itoa(len(s.parts))
		p := &partition{id: id, parents: append([]string(nil), parents...), wake: make(chan struct{})}
		s.parts = append(s.parts, p)
		s.byID[id] = p
		ids = append(ids, id)
	}
	return ids
}

// AddPartitions adds n empty partitions (as a Kafka topic grows) and
// returns their ids.
func (s *Stream) AddPartitions(n int) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, &brokers.Error{Op: "add partitions", Err: brokers.ErrClosed}
	}
	if n <= 0 {
		return nil, fmt.Errorf("memory stream: add partitions: n=%d must be positive", n)
	}
	return s.addLocked(n, nil), nil
}

// Split closes partition and creates two children of it, as a Kinesis shard
// split does. It returns the children's ids.
func (s *Stream) Split(partition string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.openPartitionLocked("split", partition)
	if err != nil {
		return nil, err
	}
	p.closed = true
	p.notify()
	return s.addLocked(2, []string{partition}), nil
}

// Merge closes partitions a and b and creates one child of both, as a
// Kinesis shard merge does. It returns the child's id.
func (s *Stream) Merge(a, b string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a == b {
		return "", fmt.Errorf("memory stream: merge %s with itself", a)
	}
	pa, err := s.openPartitionLocked("merge", a)
	if err != nil {
		return "", err
	}
	pb, err := s.openPartitionLocked("merge", b)
	if err != nil {
		return "", err
	}
	pa.closed, pb.closed = true, true
	pa.notify()
	pb.notify()
	return s.addLocked(1, []string{a, b})[0], nil
}

func (s *Stream) openPartitionLocked(op, id string) (*partition, error) {
	if s.closed {
		return nil, &brokers.Error{Op: op, Err: brokers.ErrClosed}
	}
	p, ok := s.byID[id]
	if !ok {
		return nil, &brokers.Error{Op: op, Err: fmt.Errorf("partition %q: %w", id, brokers.ErrUnknownPartition)}
	}
	if p.closed {
		return nil, fmt.Errorf("memory stream: %s: partition %s is closed", op, id)
	}
	return p, nil
}

// Produce appends msgs to partition and returns their positions. Each
// message's Position is assigned; a zero Time is set to the clock's now.
// The slices are copied.
func (s *Stream) Produce(partition string, msgs ...brokers.Message) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.openPartitionLocked("produce", partition)
	if err != nil {
		return nil, err
	}
	if len(msgs) == 0 {
		return nil, nil
	}
	now := s.clock.Now()
	positions := make([]string, len(msgs))
	for i, m := range msgs {
		m = copyMessage(m)
		m.Position = strconv.FormatInt(p.end(), 10)
		m.ID = ""
		m.Deliveries = 0
		m.Handle = nil
		if m.Time.IsZero() {
			m.Time = now
		}
		p.msgs = append(p.msgs, m)
		positions[i] = m.Position
	}
	p.notify()
	return positions, nil
}

// Trim deletes the messages of partition before position before (as
// retention does). Reading after a trimmed position then fails with
// brokers.ErrPositionGone. Trimming past the end trims everything.
func (s *Stream) Trim(partition, before string) error {
	off, err := parseOffset(before)
	if err != nil {
		return fmt.Errorf("memory stream: trim %s: %w", partition, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return &brokers.Error{Op: "trim", Err: brokers.ErrClosed}
	}
	p, ok := s.byID[partition]
	if !ok {
		return &brokers.Error{Op: "trim", Err: fmt.Errorf("partition %q: %w", partition, brokers.ErrUnknownPartition)}
	}
	off = min(off, p.end())
	if off <= p.base {
		return nil
	}
	p.msgs = append([]brokers.Message(nil), p.msgs[off-p.base:]...)
	p.base = off
	p.notify()
	return nil
}

// FailNext makes the next n calls of op fail with err; nil err means a
// retryable *brokers.Error wrapping brokers.ErrInjected. op is one of the
// Op* constants; it panics on another name (a mistake in a test).
func (s *Stream) FailNext(op string, n int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.failNext(op, n, err)
}

// Delay makes every later call of op wait d (through exec.Pause) before it
// runs; d <= 0 removes the delay.
func (s *Stream) Delay(op string, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.setDelay(op, d)
}

// ClearFaults removes every pending FailNext and Delay.
func (s *Stream) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.clear()
}

// Partitions lists every partition, closed ones included, in creation order.
func (s *Stream) Partitions(ctx context.Context) ([]brokers.Partition, error) {
	if err := s.enter(ctx, OpPartitions); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkLocked(OpPartitions); err != nil {
		return nil, err
	}
	out := make([]brokers.Partition, len(s.parts))
	for i, p := range s.parts {
		out[i] = brokers.Partition{ID: p.id, Parents: append([]string(nil), p.parents...)}
	}
	return out, nil
}

// enter runs the injected delay of op, if any, before a call does its work.
func (s *Stream) enter(ctx context.Context, op string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return &brokers.Error{Op: op, Err: brokers.ErrClosed}
	}
	d := s.faults.delay(op)
	s.mu.Unlock()
	return pause(ctx, d)
}

// checkLocked fails a call on a closed stream or with an injected failure.
func (s *Stream) checkLocked(op string) error {
	if s.closed {
		return &brokers.Error{Op: op, Err: brokers.ErrClosed}
	}
	return s.faults.take(op)
}

// Open returns a reader of partition positioned at start.
func (s *Stream) Open(ctx context.Context, partition string, start brokers.Start) (brokers.Reader, error) {
	r, err := s.OpenReader(ctx, partition, start)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// OpenReader is Open returning the concrete type.
func (s *Stream) OpenReader(ctx context.Context, partition string, start brokers.Start) (*Reader, error) {
	return s.openReader(ctx, nil, partition, start)
}

func (s *Stream) openReader(ctx context.Context, owner *StreamClient, partition string, start brokers.Start) (*Reader, error) {
	var after int64 = -1
	if start.After != "" {
		var err error
		if after, err = parseOffset(start.After); err != nil {
			return nil, &brokers.Error{Op: OpOpen, Err: err}
		}
	}
	if err := s.enter(ctx, OpOpen); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if owner != nil && owner.closed {
		return nil, &brokers.Error{Op: OpOpen, Err: brokers.ErrClosed}
	}
	if err := s.checkLocked(OpOpen); err != nil {
		return nil, err
	}
	p, ok := s.byID[partition]
	if !ok {
		return nil, &brokers.Error{Op: OpOpen, Err: fmt.Errorf("partition %q: %w", partition, brokers.ErrUnknownPartition)}
	}
	r := &Reader{s: s, p: p, owner: owner}
	switch {
	case start.After != "":
		r.next = after + 1
		if r.next < p.base {
			return nil, &brokers.Error{Op: OpOpen, Err: fmt.Errorf("partition %s after %s (oldest held is %d): %w", partition, start.After, p.base, brokers.ErrPositionGone)}
		}
	case start.Mode == brokers.Latest:
		r.next = p.end()
	default:
		r.next = p.base
	}
	if owner != nil {
		owner.readers[r] = struct{}{}
	}
	return r, nil
}

// Close closes the stream and every reader opened from it (a reader is
// closed when it, its client or its stream is); waiting fetches return
// brokers.ErrClosed. Closing twice is harmless.
func (s *Stream) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	for _, p := range s.parts {
		p.notify()
	}
	return nil
}

// Reader reads one partition of a Stream. It implements brokers.Reader.
type Reader struct {
	s     *Stream
	p     *partition
	owner *StreamClient // nil when opened on the Stream itself
	// Guarded by s.mu.
	next   int64 // offset of the next message to return
	closed bool
}

var _ brokers.Reader = (*Reader)(nil)

// Fetch returns up to max messages after the reader's position. When there
// are none it waits up to wait for some to arrive (returning early when they
// do), then looks once more. On a closed partition the batch that returns
// the last message, or any later fetch, has End set.
func (r *Reader) Fetch(ctx context.Context, max int, wait time.Duration) (brokers.Result, error) {
	if max <= 0 {
		return brokers.Result{}, &brokers.Error{Op: OpFetch, Err: fmt.Errorf("max %d must be positive", max)}
	}
	s := r.s
	if err := ctx.Err(); err != nil {
		return brokers.Result{}, err
	}
	s.mu.Lock()
	if err := r.checkLocked(); err != nil {
		s.mu.Unlock()
		return brokers.Result{}, err
	}
	d := s.faults.delay(OpFetch)
	s.mu.Unlock()
	if err := pause(ctx, d); err != nil {
		return brokers.Result{}, err
	}

	s.mu.Lock()
	err := r.checkLocked()
	if err == nil {
		err = s.faults.take(OpFetch)
	}
	if err != nil {
		s.mu.Unlock()
		return brokers.Result{}, err
	}
	res, err := r.readLocked(max)
	wake := r.p.wake
	s.mu.Unlock()
	if err != nil || len(res.Messages) > 0 || res.End || wait <= 0 {
		return res, err
	}

	if s.testHookWait != nil {
		s.testHookWait()
	}
	w := newWaiter(s.clock, wait)
	for {
		again, err := w.wait(ctx, wake, 0)
		if err != nil {
			return brokers.Result{}, err
		}
		s.mu.Lock()
		if err := r.checkLocked(); err != nil {
			s.mu.Unlock()
			return brokers.Result{}, err
		}
		res, err = r.readLocked(max)
		wake = r.p.wake
		s.mu.Unlock()
		if err != nil || len(res.Messages) > 0 || res.End || !again {
			return res, err
		}
	}
}

func (r *Reader) checkLocked() error {
	if r.closed || r.s.closed || (r.owner != nil && r.owner.closed) {
		return &brokers.Error{Op: OpFetch, Err: brokers.ErrClosed}
	}
	return nil
}

func (r *Reader) readLocked(max int) (brokers.Result, error) {
	p := r.p
	if r.next < p.base {
		return brokers.Result{}, &brokers.Error{Op: OpFetch, Err: fmt.Errorf("partition %s at %d (oldest held is %d): %w", p.id, r.next, p.base, brokers.ErrPositionGone)}
	}
	end := p.end()
	n := min(int64(max), max64(end-r.next, 0))
	var msgs []brokers.Message
	if n > 0 {
		msgs = make([]brokers.Message, n)
		from := r.next - p.base
		for i := range msgs {
			msgs[i] = copyMessage(p.msgs[from+int64(i)])
		}
		r.next += n
	}
	return brokers.Result{
		Messages: msgs,
		End:      p.closed && r.next >= end,
		Lag:      max64(end-r.next, 0),
	}, nil
}

// Close releases the reader. Closing twice is harmless.
func (r *Reader) Close() error {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	r.closed = true
	if r.owner != nil {
		delete(r.owner.readers, r)
	}
	r.p.notify()
	return nil
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

var errNotOffset = errors.New("not a decimal offset")

func parseOffset(pos string) (int64, error) {
	n, err := strconv.ParseInt(pos, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("position %q: %w", pos, errNotOffset)
	}
	return n, nil
}

// copyMessage returns m with its own copies of Key, Value and Headers.
func copyMessage(m brokers.Message) brokers.Message {
	m.Key = cloneBytes(m.Key)
	m.Value = cloneBytes(m.Value)
	if m.Headers != nil {
		hs := make([]brokers.Header, len(m.Headers))
		for i, h := range m.Headers {
			hs[i] = brokers.Header{Key: h.Key, Value: cloneBytes(h.Value)}
		}
		m.Headers = hs
	}
	return m
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}

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

var _ brokers.Stream = (*StreamClient)(nil)

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
	r, err := c.s.openReader(ctx, c, partition, start)
	if err != nil {
		return nil, err
	}
	return r, nil
}

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
