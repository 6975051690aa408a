package memory

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/internal/open"
	"github.com/drover-dev/drover/internal/clock"
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
	c.Partitions = cmp.Or(c.Partitions, 1)
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

	mu    sync.Mutex
	parts []*partition // in creation order; a partition's id is its index here
	// parents are the parents of the partitions that have any, by id (a
	// split's or merge's children): kept here, not in each partition, so
	// that 10,000 partitions without parents cost 24 bytes less each
	// (issue 12 item 5).
	parents map[string][]string
	faults  faults
	closed  bool
	// lives counts the Recreate calls: the stream's id is "life-<lives>"
	// (brokers.StreamIdentifier), as a Kafka topic ID names one topic of
	// a name.
	lives int
}

var (
	_ brokers.Stream           = (*Stream)(nil)
	_ brokers.Resolver         = (*Stream)(nil)
	_ brokers.StreamIdentifier = (*Stream)(nil)
)

// StreamID implements brokers.StreamIdentifier: "life-N" after N
// recreations.
func (s *Stream) StreamID(ctx context.Context, partition string) (string, error) {
	if err := s.enter(ctx, OpOpen); err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.partitionLocked(OpOpen, partition); err != nil {
		return "", err
	}
	return s.idLocked(), nil
}

func (s *Stream) idLocked() string { return "life-" + strconv.Itoa(s.lives) }

// nanos is a time kept in 8 bytes instead of time.Time's 24 (a
// partition's, one per unit: issue 12 item 5): Unix nanoseconds, 0 for the
// zero time. It keeps no monotonic reading and no location.
type nanos int64

func nanosOf(t time.Time) nanos {
	if t.IsZero() {
		return 0
	}
	return nanos(t.UnixNano())
}

func (n nanos) time() time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(n))
}

type partition struct {
	id     string
	base   int64    // offset of recs[0]; offsets below were trimmed
	recs   []record // offsets base, base+1, ...
	closed bool     // split or merged: no more messages
	// forgotten: no longer listed, its messages gone (Forget).
	forgotten bool
	// gone: the stream was recreated; this partition belongs to the
	// incarnation before (Recreate).
	gone bool
	// openTx are the open transactions that hold records here, in the
	// order of their first record.
	openTx []*Tx
	// trimmedTime is the latest Time of a message trimmed away (zero when
	// none was), so that a start At a time no later than it is known to
	// miss a message.
	trimmedTime nanos
	// wake is closed and forgotten whenever a reader waiting on this
	// partition has something new to look at (messages, a transaction
	// ending, closing, Close); nil while no reader waits (waitChan makes
	// it), so that an idle partition and a publish nobody waits for
	// allocate no channel.
	wake chan struct{}
	// openedAt is when a reader last asked to open it (whatever came of it).
	openedAt nanos
	// wakers are the Reader.Wake arrangements waiting for the next notify,
	// in the order they were made (so that the calls are in a
	// deterministic order).
	wakers []*wakeup
}

// OpenedAt reports when a reader last asked to open partition (zero: never;
// the open may have failed, for example on a position the partition does
// not know). The testkit uses it to know a recreated stream was looked at.
func (s *Stream) OpenedAt(partition string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.lookupLocked(partition); ok {
		return p.openedAt.time()
	}
	return time.Time{}
}

// record is one offset of a partition: a message, plain or written in a
// transaction, or a transaction's control marker.
type record struct {
	msg brokers.Message
	// subs, when not nil, are the user records of a KPL-style aggregate
	// (ProduceAggregate), returned at sub-positions "<offset>/<index>";
	// msg then carries only the aggregate's position and time.
	subs   []brokers.Message
	tx     *Tx  // the transaction that wrote it; nil for a plain message
	marker bool // the commit or abort marker of tx: never returned
}

// visible reports whether a reader returns the record. Only records below
// the last stable offset are asked, so tx is never open here.
func (r *record) visible() bool {
	return !r.marker && (r.tx == nil || r.tx.state == txCommitted)
}

func (p *partition) end() int64 { return p.base + int64(len(p.recs)) }

// lso is the last stable offset: the first offset of the oldest open
// transaction, or the end when none is open. Readers do not read at or
// past it.
func (p *partition) lso() int64 {
	if len(p.openTx) == 0 {
		return p.end()
	}
	return p.openTx[0].first
}

// notify wakes every fetch waiting on p and calls the Wake arrangements
// made on it (with the stream's lock held).
func (p *partition) notify() {
	if p.wake != nil {
		close(p.wake)
		p.wake = nil
	}
	p.callWakers()
}

// waitChan is the channel the next notify closes (with the stream's lock
// held).
func (p *partition) waitChan() chan struct{} {
	if p.wake == nil {
		p.wake = make(chan struct{})
	}
	return p.wake
}

// callWakers calls the Wake arrangements made on p, and forgets them.
func (p *partition) callWakers() {
	ws := p.wakers
	p.wakers = nil
	for _, w := range ws {
		w.fire()
	}
}

// NewStream returns a stream with cfg.Partitions empty partitions.
func NewStream(cfg StreamConfig) (*Stream, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	s := &Stream{
		clock: cfg.Clock,
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
		s.parts = append(s.parts, &partition{id: id})
		if len(parents) > 0 {
			if s.parents == nil {
				s.parents = map[string][]string{}
			}
			s.parents[id] = append([]string(nil), parents...)
		}
		ids = append(ids, id)
	}
	return ids
}

// NextID is the id the next partition added (AddPartitions, Split) gets.
func (s *Stream) NextID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strconv.Itoa(len(s.parts))
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
	s.closeLocked(p)
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
	s.closeLocked(pa)
	s.closeLocked(pb)
	return s.addLocked(1, []string{a, b})[0], nil
}

// closeLocked closes p for a reshard. Its open transactions are aborted
// first (their markers written), so that its last stable offset is its end
// and a reader reaches End.
func (s *Stream) closeLocked(p *partition) {
	for len(p.openTx) > 0 {
		tx := p.openTx[0]
		tx.ended = reasonReshard
		s.endTxLocked(tx, txAborted)
	}
	p.closed = true
	p.notify()
}

// Forget removes a closed partition from the listing, as Kinesis stops
// listing a closed shard once it has aged past retention. Its messages
// aged out with it: a reader still open on it gets brokers.ErrPositionGone
// if it had not read them all, End if it had; Open, Resolve, Trim and
// Produce then fail with brokers.ErrUnknownPartition. Its children keep
// naming it in their Parents. Forgetting an open partition is an error.
func (s *Stream) Forget(partition string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.partitionLocked("forget", partition)
	if err != nil {
		return err
	}
	if !p.closed {
		return fmt.Errorf("memory stream: forget: partition %s is open; only a closed partition (split or merged) can be forgotten", partition)
	}
	s.trimLocked(p, p.end())
	p.forgotten = true
	p.notify()
	return nil
}

// Recreate deletes the stream and creates it again, as an operator
// deleting a Kafka topic or a Kinesis stream and creating one of the same
// name does. The new stream has as many partitions as the old one had open
// (not closed by a reshard), named "0".."n-1", without parents; every
// message is gone and offsets restart at 0. Open transactions are aborted
// (later calls on them fail with ErrTxDone).
//
// Readers opened before keep pointing at the old incarnation, as a client
// holding a position does: their next Fetch fails, not retryable, with
// brokers.ErrPositionUnknown (ErrUnknownPartition when the new stream has
// no partition of that id), as a client that can tell incarnations apart
// reports it (Kafka's topic ids, Kinesis sequence numbers that name their
// stream). A new Open of a start recorded with the old StreamID fails with
// ErrPositionUnknown; without a StreamID it cannot tell an old offset from
// a new one, as on Kafka without topic ids: after a position beyond a
// partition's new end it fails with ErrPositionUnknown, after one below it
// reads on from there.
// Injected faults stay.
func (s *Stream) Recreate() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return &brokers.Error{Op: "recreate", Err: brokers.ErrClosed}
	}
	n := 0
	for _, p := range s.parts {
		if !p.closed {
			n++
		}
		for _, tx := range p.openTx {
			tx.state, tx.ended = txAborted, reasonRecreated
		}
		p.openTx = nil
		p.gone = true
		p.notify()
	}
	s.parts, s.parents = nil, nil
	s.lives++
	s.addLocked(max(n, 1), nil)
	return nil
}

// lookupLocked is partition id, if the stream lists it (not forgotten).
// Ids are indexes into parts (strconv.Itoa, "0".."n-1" again after a
// Recreate), so no map by id is kept: it was 40 bytes per partition
// (issue 12 item 5).
func (s *Stream) lookupLocked(id string) (*partition, bool) {
	i, err := strconv.Atoi(id)
	if err != nil || i < 0 || i >= len(s.parts) {
		return nil, false
	}
	if p := s.parts[i]; p.id == id && !p.forgotten {
		return p, true
	}
	return nil, false
}

// knownLocked returns partition id, or ErrUnknownPartition under op.
func (s *Stream) knownLocked(op, id string) (*partition, error) {
	p, ok := s.lookupLocked(id)
	if !ok {
		return nil, &brokers.Error{Op: op, Err: fmt.Errorf("partition %q: %w", id, brokers.ErrUnknownPartition)}
	}
	return p, nil
}

// partitionLocked returns partition id of a stream that is not closed.
func (s *Stream) partitionLocked(op, id string) (*partition, error) {
	if s.closed {
		return nil, &brokers.Error{Op: op, Err: brokers.ErrClosed}
	}
	return s.knownLocked(op, id)
}

// clientPartitionLocked returns partition id for a call of op through
// owner (nil: the stream itself): the owner must be open and the call
// pass checkLocked.
func (s *Stream) clientPartitionLocked(op string, owner *StreamClient, id string) (*partition, error) {
	if owner != nil && owner.closed {
		return nil, &brokers.Error{Op: op, Err: brokers.ErrClosed}
	}
	if err := s.checkLocked(op); err != nil {
		return nil, err
	}
	return s.knownLocked(op, id)
}

func (s *Stream) openPartitionLocked(op, id string) (*partition, error) {
	p, err := s.partitionLocked(op, id)
	if err != nil {
		return nil, err
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
	positions := s.appendLocked(p, nil, msgs)
	p.notify()
	return positions, nil
}

// appendLocked appends msgs to p as records of tx (nil: plain) and returns
// their positions.
func (s *Stream) appendLocked(p *partition, tx *Tx, msgs []brokers.Message) []string {
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
		p.recs = append(p.recs, record{msg: m, tx: tx})
		positions[i] = m.Position
	}
	return positions
}

// Trim deletes the messages of partition before position before (as
// retention does). Reading after a trimmed position then fails with
// brokers.ErrPositionGone. Trimming past the end trims everything up to
// the last stable offset: records of an open transaction are kept.
func (s *Stream) Trim(partition, before string) error {
	off, err := parseOffset(before)
	if err != nil {
		return fmt.Errorf("memory stream: trim %s: %w", partition, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.partitionLocked("trim", partition)
	if err != nil {
		return err
	}
	s.trimLocked(p, min(off, p.lso()))
	return nil
}

// trimLocked drops the records of p before off (at most its end).
func (s *Stream) trimLocked(p *partition, off int64) {
	if off <= p.base {
		return
	}
	for _, r := range p.recs[:off-p.base] {
		if !r.marker && r.msg.Time.After(p.trimmedTime.time()) {
			p.trimmedTime = nanosOf(r.msg.Time)
		}
	}
	p.recs = append([]record(nil), p.recs[off-p.base:]...)
	p.base = off
	p.notify()
}

// Partitions lists every partition, closed ones included, in creation
// order; forgotten ones (Forget) are left out.
func (s *Stream) Partitions(ctx context.Context) ([]brokers.Partition, error) {
	if err := s.enter(ctx, OpPartitions); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkLocked(OpPartitions); err != nil {
		return nil, err
	}
	out := make([]brokers.Partition, 0, len(s.parts))
	for _, p := range s.parts {
		if !p.forgotten {
			out = append(out, brokers.Partition{ID: p.id, Parents: append([]string(nil), s.parents[p.id]...)})
		}
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

// Open returns a reader of partition positioned at start: after
// start.After; else at the first message stamped at or after start.At;
// else at the last stable offset (Latest) or the oldest message held
// (Earliest). Opening after a trimmed position, or At a time no later than
// that of a trimmed message, fails with brokers.ErrPositionGone; after a
// position beyond the partition's end with brokers.ErrPositionUnknown;
// both are not retryable.
func (s *Stream) Open(ctx context.Context, partition string, start brokers.Start) (brokers.Reader, error) {
	return open.Reader(s.OpenReader(ctx, partition, start))
}

// OpenReader is Open returning the concrete type.
func (s *Stream) OpenReader(ctx context.Context, partition string, start brokers.Start) (*Reader, error) {
	return s.openReader(ctx, nil, partition, start)
}

func (s *Stream) openReader(ctx context.Context, owner *StreamClient, partition string, start brokers.Start) (*Reader, error) {
	var after int64 = -1
	sub := -1 // After is a sub-position: the index of the aggregate's user record applied last
	if start.After != "" {
		var err error
		seq := start.After
		seq, sub = brokers.SplitPosition(seq)
		if after, err = parseOffset(seq); err != nil {
			return nil, &brokers.Error{Op: OpOpen, Err: err}
		}
	}
	if err := s.enter(ctx, OpOpen); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.clientPartitionLocked(OpOpen, owner, partition)
	if err != nil {
		return nil, err
	}
	p.openedAt = nanosOf(s.clock.Now())
	if id := s.idLocked(); start.StreamID != "" && start.StreamID != id {
		return nil, &brokers.Error{Op: OpOpen, Err: fmt.Errorf("partition %s: the stream was deleted and created again since the start was recorded (stream id %s, the start's %s): %w",
			partition, id, start.StreamID, brokers.ErrPositionUnknown)}
	}
	r := &Reader{s: s, p: p, owner: owner}
	switch {
	case start.After != "":
		r.next = after + 1
		if sub >= 0 { // inside an aggregate: its user records after sub are next
			r.next, r.sub, r.checkSub = after, sub+1, true
		}
		if r.next < p.base {
			return nil, &brokers.Error{Op: OpOpen, Err: fmt.Errorf("partition %s after %s (oldest held is %d): %w", partition, start.After, p.base, brokers.ErrPositionGone)}
		}
		if r.next > p.end() || sub >= 0 && r.next == p.end() {
			return nil, &brokers.Error{Op: OpOpen, Err: fmt.Errorf("partition %s after %s (its end is %d): %w", partition, start.After, p.end(), brokers.ErrPositionUnknown)}
		}
	case !start.At.IsZero():
		if r.next, err = p.firstAt(OpOpen, partition, start.At); err != nil {
			return nil, err
		}
	case start.Mode == brokers.Latest:
		r.next = p.lso()
	default:
		r.next = p.base
	}
	if owner != nil {
		owner.readers[r] = struct{}{}
	}
	return r, nil
}

// Resolve turns mode into a concrete start of partition
// (brokers.Resolver). Latest is after the message before the last stable
// offset, so that a committed transaction still open now is read; Earliest
// is after the last trimmed position. Either is Start{Mode: Earliest} when
// nothing lies before it (no message was ever written, or none trimmed).
func (s *Stream) Resolve(ctx context.Context, partition string, mode brokers.StartMode) (brokers.Start, error) {
	return s.resolve(ctx, nil, partition, mode)
}

func (s *Stream) resolve(ctx context.Context, owner *StreamClient, partition string, mode brokers.StartMode) (brokers.Start, error) {
	if mode != brokers.Earliest && mode != brokers.Latest {
		return brokers.Start{}, &brokers.Error{Op: OpResolve, Err: fmt.Errorf("unknown start mode %d", mode)}
	}
	if err := s.enter(ctx, OpResolve); err != nil {
		return brokers.Start{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.clientPartitionLocked(OpResolve, owner, partition)
	if err != nil {
		return brokers.Start{}, err
	}
	first := p.base // the first offset the start must not skip
	if mode == brokers.Latest {
		first = p.lso()
	}
	if first == 0 {
		return brokers.Start{Mode: brokers.Earliest}, nil
	}
	return brokers.Start{After: strconv.FormatInt(first-1, 10)}, nil
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
