package nats

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/internal/lifetime"
	"github.com/drover-dev/drover/brokers/internal/open"
)

// wholeStream is the partition ID of a stream that has no subjects of its
// own (a mirror): the reader does not filter.
const wholeStream = ">"

// Stream is a JetStream stream read in order, one partition per subject
// filter, with drover keeping the position. It implements brokers.Stream
// and is safe for concurrent use.
type Stream struct {
	c    *conn
	cfg  StreamConfig
	conv converter

	mu      sync.Mutex
	closed  bool
	readers map[*Reader]struct{}
}

var (
	_ brokers.Stream   = (*Stream)(nil)
	_ brokers.Resolver = (*Stream)(nil)
)

// NewStream connects to NATS and checks that cfg.Stream exists.
func NewStream(ctx context.Context, cfg StreamConfig) (*Stream, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	c, err := dial(ctx, cfg.Conn)
	if err != nil {
		return nil, err
	}
	s := &Stream{c: c, cfg: cfg, readers: make(map[*Reader]struct{})}
	s.conv = func(m jetstream.Msg) converted { return convert(m, s.cfg.Key, false) }
	if _, err := s.info(ctx, "open stream"); err != nil {
		c.close()
		return nil, err
	}
	return s, nil
}

// info fetches the stream's configuration and state.
func (s *Stream) info(ctx context.Context, op string) (*jetstream.StreamInfo, error) {
	if err := s.c.ready(op); err != nil {
		return nil, err
	}
	octx, done := s.c.life.Op(ctx)
	defer done()
	rctx, cancel := context.WithTimeout(octx, s.cfg.Conn.RequestTimeout)
	defer cancel()
	st, err := s.c.js.Stream(rctx, s.cfg.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, &brokers.Error{Op: op, Err: fmt.Errorf("stream %q not found", s.cfg.Stream)}
	}
	if err != nil {
		return nil, s.c.life.Finish(ctx, op, fmt.Errorf("stream %q: %w", s.cfg.Stream, err))
	}
	return st.CachedInfo(), nil
}

// partitions lists the partition IDs given the stream's info.
func (s *Stream) partitions(info *jetstream.StreamInfo) []string {
	switch {
	case len(s.cfg.Subjects) > 0:
		return slices.Clone(s.cfg.Subjects)
	case len(info.Config.Subjects) > 0:
		return slices.Clone(info.Config.Subjects)
	default:
		return []string{wholeStream}
	}
}

// Partitions lists one partition per subject filter: StreamConfig.Subjects,
// or the stream's subjects as the server has them now.
func (s *Stream) Partitions(ctx context.Context) ([]brokers.Partition, error) {
	const op = "list partitions"
	info, err := s.checkedInfo(ctx, op)
	if err != nil {
		return nil, err
	}
	ids := s.partitions(info)
	out := make([]brokers.Partition, len(ids))
	for i, id := range ids {
		out[i] = brokers.Partition{ID: id}
	}
	return out, nil
}

// Resolve turns mode into a concrete start of partition (a subject
// filter), from the stream's state now:
//   - Latest: Start{After: the stream's last sequence}, or Start{Mode:
//     Earliest} when nothing was ever stored (last sequence 0);
//   - Earliest: Start{After: the stream's first sequence - 1} when
//     messages were removed from its front (first sequence > 1), else
//     Start{Mode: Earliest}.
//
// Sequences are the stream's, shared by its subjects, so the start of one
// subject is named in them too.
func (s *Stream) Resolve(ctx context.Context, partition string, mode brokers.StartMode) (brokers.Start, error) {
	const op = "resolve"
	if err := s.check(ctx, op); err != nil {
		return brokers.Start{}, err
	}
	if mode != brokers.Earliest && mode != brokers.Latest {
		return brokers.Start{}, &brokers.Error{Op: op, Err: fmt.Errorf("unknown start mode %d", mode)}
	}
	info, err := s.info(ctx, op)
	if err != nil {
		return brokers.Start{}, err
	}
	if !slices.Contains(s.partitions(info), partition) {
		return brokers.Start{}, &brokers.Error{Op: op, Err: fmt.Errorf("partition %q of stream %q: %w", partition, s.cfg.Stream, brokers.ErrUnknownPartition)}
	}
	st := info.State
	switch {
	case mode == brokers.Latest && st.LastSeq > 0:
		return brokers.Start{After: strconv.FormatUint(st.LastSeq, 10)}, nil
	case mode == brokers.Earliest && st.FirstSeq > 1:
		return brokers.Start{After: strconv.FormatUint(st.FirstSeq-1, 10)}, nil
	}
	return brokers.Start{Mode: brokers.Earliest}, nil
}

func (s *Stream) check(ctx context.Context, op string) error {
	return s.c.life.Check(ctx, op)
}

// checkedInfo is info on a stream that is open, for a caller whose ctx has
// not ended.
func (s *Stream) checkedInfo(ctx context.Context, op string) (*jetstream.StreamInfo, error) {
	if err := s.check(ctx, op); err != nil {
		return nil, err
	}
	return s.info(ctx, op)
}

// Open returns a reader of partition (a subject filter) positioned at
// start. Positions are stream sequences; Start.At reads from the first
// message the stream stored at or after At. Reading after a position whose
// next message the stream no longer holds fails with
// brokers.ErrPositionGone when the reader can tell (see the package doc);
// after a position beyond the stream's last sequence (the stream was
// deleted and created again) with brokers.ErrPositionUnknown.
func (s *Stream) Open(ctx context.Context, partition string, start brokers.Start) (brokers.Reader, error) {
	return open.Reader(s.OpenReader(ctx, partition, start))
}

// OpenReader is Open returning the concrete type.
func (s *Stream) OpenReader(ctx context.Context, partition string, start brokers.Start) (*Reader, error) {
	const op = "open"
	var after uint64
	if start.After != "" {
		var err error
		if after, err = strconv.ParseUint(start.After, 10, 64); err != nil {
			return nil, &brokers.Error{Op: op, Err: fmt.Errorf("position %q is not a stream sequence", start.After)}
		}
	}
	info, err := s.checkedInfo(ctx, op)
	if err != nil {
		return nil, err
	}
	ids := s.partitions(info)
	if !slices.Contains(ids, partition) {
		return nil, &brokers.Error{Op: op, Err: fmt.Errorf("partition %q of stream %q: %w", partition, s.cfg.Stream, brokers.ErrUnknownPartition)}
	}
	r := &Reader{
		s:         s,
		life:      s.c.life.Child(),
		exact:     partition == wholeStream || slices.Equal(info.Config.Subjects, []string{partition}),
		filter:    partition,
		partition: partition,
		created:   info.Created.UnixNano(),
	}
	if partition == wholeStream {
		r.filter = ""
	}
	switch {
	case start.After != "":
		r.next = after + 1
		if err := r.unknown(op, info, r.next); err != nil {
			return nil, err
		}
		if err := r.gone(info, r.next); err != nil {
			return nil, err
		}
	case !start.At.IsZero():
		r.at = start.At
		r.next = 0 // the first message stored at or after r.at
	case start.Mode == brokers.Latest:
		r.next = info.State.LastSeq + 1
	default:
		r.next = 0 // the first message the stream holds
	}
	// Make the consumer now, so that a Latest reader counts from Open.
	r.mu.Lock()
	err = r.ensure(ctx, op)
	r.made = true
	r.mu.Unlock()
	if err != nil {
		r.life.Close()
		return nil, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		r.Close()
		return nil, lifetime.ClosedErr(op)
	}
	s.readers[r] = struct{}{}
	s.mu.Unlock()
	return r, nil
}

// Close closes every reader (deleting its consumer on the server when the
// connection is up) and the connection. Fetches in flight return
// brokers.ErrClosed. Closing twice is harmless.
func (s *Stream) Close() error {
	rs, first := lifetime.ShutAll(&s.mu, &s.closed, s.readers)
	if !first {
		return nil
	}
	for _, r := range rs {
		r.life.Close()
	}
	for _, r := range rs {
		r.mu.Lock()
		r.drop()
		r.mu.Unlock()
	}
	s.c.close()
	return nil
}

// Reader reads one partition of a Stream in stream-sequence order through
// an ephemeral pull consumer (no acks, in memory) that it re-creates at its
// own position whenever it may have missed a delivery: after an error, a
// cancelled or abandoned wait, a reconnect or a server restart. It
// implements brokers.Reader.
type Reader struct {
	s         *Stream
	life      lifetime.Life
	partition string
	filter    string // "" reads the whole stream
	// exact is set when the partition is the whole stream, so that a gap in
	// sequences can only mean deleted messages and ErrPositionGone is
	// exact; for one subject of several, gaps are other subjects.
	exact bool
	// created is the stream's creation time (Unix ns) at Open: a stream
	// created again since reuses the sequences the reader counts in.
	created int64

	mu   sync.Mutex // guards the fields below (Fetch against Close)
	next uint64     // next sequence to return; 0: the first the stream holds (at or after at)
	at   time.Time  // with next 0 and not zero: read from the first message stored at or after it
	made bool       // the first consumer was made: a later one checks the stream first
	cons jetstream.Consumer
}

var _ brokers.Reader = (*Reader)(nil)

// gone fails when the stream no longer holds sequence next although it
// held it (it was deleted by retention or a purge before being read).
func (r *Reader) gone(info *jetstream.StreamInfo, next uint64) error {
	if !r.exact || next == 0 || info.State.FirstSeq <= next {
		return nil
	}
	return &brokers.Error{Op: "fetch", Err: fmt.Errorf("stream %q sequence %d (the oldest held is %d): %w", r.s.cfg.Stream, next, info.State.FirstSeq, brokers.ErrPositionGone)}
}

// unknown fails when sequence next - 1, the position to read after, is
// beyond the stream's last sequence: the position is not one of this
// stream's (it was deleted and created again with fewer messages), and
// its sequences will be used again for new messages.
func (r *Reader) unknown(op string, info *jetstream.StreamInfo, next uint64) error {
	if next == 0 || next-1 <= info.State.LastSeq {
		return nil
	}
	return &brokers.Error{Op: op, Err: fmt.Errorf("stream %q subject %q: position %d is beyond the stream's last sequence %d (was the stream deleted and created again?): %w",
		r.s.cfg.Stream, r.partition, next-1, info.State.LastSeq, brokers.ErrPositionUnknown)}
}

// recreated fails when the stream is not the one the reader opened on: it
// was deleted and created again (a new creation time), so the position the
// reader counts from may name another message now.
func (r *Reader) recreated(op string, info *jetstream.StreamInfo) error {
	created := info.Created.UnixNano()
	if created == r.created {
		return r.unknown(op, info, r.next)
	}
	pos := "the start"
	if r.next > 0 {
		pos = fmt.Sprintf("position %d", r.next-1)
	}
	return &brokers.Error{Op: op, Err: fmt.Errorf("stream %q subject %q was deleted and created again while it was read (created %s, now %s); reading after %s of the old stream: %w",
		r.s.cfg.Stream, r.partition, time.Unix(0, r.created).UTC().Format(time.RFC3339Nano), info.Created.UTC().Format(time.RFC3339Nano), pos, brokers.ErrPositionUnknown)}
}

// ensure makes the reader's consumer when it has none. A consumer made
// again (after a drop) first checks that the stream is still the one the
// reader opened on. r.mu is held.
func (r *Reader) ensure(ctx context.Context, op string) error {
	if r.cons != nil {
		return nil
	}
	c := r.s.c
	if err := c.ready(op); err != nil {
		return err
	}
	if r.made {
		info, err := r.s.info(ctx, op)
		if err != nil {
			return err
		}
		if err := r.recreated(op, info); err != nil {
			return err
		}
	}
	cc := jetstream.ConsumerConfig{
		AckPolicy:         jetstream.AckNonePolicy,
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		FilterSubject:     r.filter,
		InactiveThreshold: r.s.cfg.InactiveThreshold,
		MemoryStorage:     true,
		Replicas:          1,
	}
	switch {
	case r.next > 0:
		cc.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cc.OptStartSeq = r.next
	case !r.at.IsZero():
		at := r.at
		cc.DeliverPolicy = jetstream.DeliverByStartTimePolicy
		cc.OptStartTime = &at
	}
	octx, done := r.life.Op(ctx)
	defer done()
	rctx, cancel := context.WithTimeout(octx, r.s.cfg.Conn.RequestTimeout)
	defer cancel()
	cons, err := c.js.CreateConsumer(rctx, r.s.cfg.Stream, cc)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return &brokers.Error{Op: op, Err: fmt.Errorf("stream %q not found", r.s.cfg.Stream)}
	}
	if err != nil {
		return r.life.Finish(ctx, op, fmt.Errorf("create reader consumer on stream %q: %w", r.s.cfg.Stream, err))
	}
	r.cons = cons
	return nil
}

// drop forgets the consumer and deletes it on the server, best effort.
// r.mu is held.
func (r *Reader) drop() {
	cons := r.cons
	r.cons = nil
	if cons == nil || r.s.c.ready("close") != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := r.s.c.js.DeleteConsumer(ctx, r.s.cfg.Stream, cons.CachedInfo().Name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		r.s.cfg.Conn.Logger.Debug("nats: delete reader consumer", "stream", r.s.cfg.Stream, "err", err)
	}
}

// Fetch returns up to max messages after the reader's position, waiting up
// to wait for the first (see the package doc). Lag is the number of
// messages of the partition after the last one returned. Oldest is not
// set: the next message is no older than the last one returned, whose
// time drover takes for it (actors.Lag), so no call is made for it.
func (r *Reader) Fetch(ctx context.Context, max int, wait time.Duration) (brokers.Result, error) {
	const op = "fetch"
	if max <= 0 {
		return brokers.Result{}, maxErr(op, max)
	}
	if err := r.life.Check(ctx, op); err != nil {
		return brokers.Result{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.ensure(ctx, op); err != nil {
		return brokers.Result{}, err
	}
	octx, done := r.life.Op(ctx)
	defer done()
	p, err := r.s.c.pull(octx, op, r.cons, max, wait, 0, r.s.conv)
	if err != nil {
		r.drop()
		return brokers.Result{}, r.life.Finish(ctx, op, err)
	}
	if p.abandoned {
		// The server may still deliver into the abandoned request: what it
		// sends there is lost to this consumer, so start a new one.
		defer r.drop()
	}
	res := brokers.Result{Lag: 0}
	if len(p.msgs) > 0 {
		res.Messages = make([]brokers.Message, 0, len(p.msgs))
	}
	for i, cm := range p.msgs {
		if cm.err != nil {
			r.drop()
			return brokers.Result{}, translate(op, cm.err)
		}
		if cm.seq < r.next {
			continue // delivered before by a consumer we replaced
		}
		if i == 0 && r.exact && r.next > 0 && cm.seq > r.next {
			if err := r.checkGap(ctx, op); err != nil {
				r.drop()
				return brokers.Result{}, err
			}
		}
		res.Messages = append(res.Messages, cm.msg)
		res.Lag = int64(cm.pending)
		r.next = cm.seq + 1
	}
	return res, nil
}

// checkGap runs when the first message of a fetch is after the reader's
// next sequence on a whole-stream partition: the messages in between were
// deleted. It fails with ErrPositionGone when the stream's oldest message
// is past next (retention or a purge took them before they were read).
func (r *Reader) checkGap(ctx context.Context, op string) error {
	info, err := r.s.info(ctx, op)
	if err != nil {
		return err
	}
	return r.gone(info, r.next)
}

// Close releases the reader and deletes its consumer. A fetch in flight
// returns brokers.ErrClosed. Closing twice is harmless.
func (r *Reader) Close() error {
	r.life.Close()
	lifetime.Leave(&r.s.mu, r.s.readers, r)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.drop()
	return nil
}
