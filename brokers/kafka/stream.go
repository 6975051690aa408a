package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/internal/lifetime"
)

// Stream reads one Kafka topic as a brokers.Stream. Safe for concurrent
// use.
type Stream struct {
	cfg   Config
	log   *slog.Logger
	base  []kgo.Opt // connection options shared by every client
	admin *kgo.Client
	adm   *kadm.Client
	meta  metaQueue
	// life ends with Close: the metadata requests callers share run
	// under it, not under one caller's context.
	life    context.Context
	endLife context.CancelFunc

	mu      sync.Mutex
	readers map[*Reader]struct{}
	// consumers are the shared clients readers fetch from: the first is
	// kept until Close; a further one exists only while two readers of
	// one partition are open at once (see consumerFor).
	consumers []*consumer
	closed    bool
}

var _ brokers.Stream = (*Stream)(nil)

// New validates cfg and returns a Stream. It does not connect: the first
// call does, so New succeeds while the brokers are down.
func New(cfg Config) (*Stream, error) {
	return newStream(cfg)
}

// newStream is New with further options for every client (tests count
// connections with a dialer of their own).
func newStream(cfg Config, extra ...kgo.Opt) (*Stream, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	base, err := cfg.clientOpts()
	if err != nil {
		return nil, fmt.Errorf("kafka config: %w", err)
	}
	base = append(base, extra...)
	admin, err := kgo.NewClient(base...)
	if err != nil {
		return nil, fmt.Errorf("kafka: new client: %s", err)
	}
	life, endLife := context.WithCancel(context.Background())
	return &Stream{
		life:    life,
		endLife: endLife,
		cfg:     cfg,
		log:     cfg.Logger.With("topic", cfg.Topic),
		base:    base,
		admin:   admin,
		adm:     kadm.NewClient(admin),
		readers: make(map[*Reader]struct{}),
	}, nil
}

func (s *Stream) closedErr(op string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return &brokers.Error{Op: op, Err: brokers.ErrClosed}
	}
	return nil
}

// requestCtx bounds one admin request by the configured request timeout.
func (s *Stream) requestCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.cfg.RequestTimeout)
}

// Partitions lists the topic's partitions, "0".."n-1". Kafka partitions
// have no parents.
func (s *Stream) Partitions(ctx context.Context) ([]brokers.Partition, error) {
	const op = "list partitions"
	ids, err := s.partitionIDs(ctx, op)
	if err != nil {
		return nil, err
	}
	out := make([]brokers.Partition, len(ids))
	for i, id := range ids {
		out[i] = brokers.Partition{ID: strconv.Itoa(int(id))}
	}
	return out, nil
}

func (s *Stream) partitionIDs(ctx context.Context, op string) ([]int32, error) {
	ids, _, err := s.topicMeta(ctx, op)
	return ids, err
}

// topicMeta returns the topic's partitions, sorted, and its topic ID (zero
// when the broker predates topic IDs, Kafka < 2.8), from a metadata
// request that starts after this call (see metaQueue).
func (s *Stream) topicMeta(ctx context.Context, op string) ([]int32, [16]byte, error) {
	if err := s.closedErr(op); err != nil {
		return nil, [16]byte{}, err
	}
	call := s.meta.join(s.fetchMeta)
	select {
	case <-call.done:
	case <-ctx.Done():
		return nil, [16]byte{}, ctx.Err()
	}
	if call.err == nil {
		return call.ids, call.topicID, nil
	}
	if cerr := s.closedErr(op); cerr != nil {
		return nil, [16]byte{}, cerr
	}
	return nil, [16]byte{}, translate(ctx, op, fmt.Errorf("topic %s: %w", s.cfg.Topic, call.err))
}

// fetchMeta asks for the topic's metadata under the stream's lifetime and
// the request timeout. A metadata request of our own, not kadm's
// ListTopics: kadm answers from the client's cache for up to
// MetadataMinAge, which would hide both new partitions and a broker that
// is down.
func (s *Stream) fetchMeta() (ids []int32, topicID [16]byte, err error) {
	rctx, cancel := context.WithTimeout(s.life, s.cfg.RequestTimeout)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(s.cfg.Topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(rctx, s.admin)
	if err != nil {
		return nil, topicID, err
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != s.cfg.Topic {
			continue
		}
		if err = kerr.ErrorForCode(t.ErrorCode); err != nil {
			return nil, topicID, err
		}
		ids = make([]int32, 0, len(t.Partitions))
		for _, p := range t.Partitions {
			ids = append(ids, p.Partition)
		}
		slices.Sort(ids)
		return ids, t.TopicID, nil
	}
	return nil, topicID, kerr.UnknownTopicOrPartition
}

var _ brokers.StreamIdentifier = (*Stream)(nil)

// StreamID implements brokers.StreamIdentifier: the topic ID in hex, or ""
// when the broker has no topic IDs (before Kafka 2.8).
func (s *Stream) StreamID(ctx context.Context, partition string) (string, error) {
	_, topicID, err := s.partition(ctx, "stream id", partition)
	if err != nil {
		return "", err
	}
	return topicIDString(topicID), nil
}

// topicIDString is id in hex, "" for the zero id (no topic IDs).
func topicIDString(id [16]byte) string {
	if id == ([16]byte{}) {
		return ""
	}
	return fmt.Sprintf("%x", id[:])
}

// partition parses a partition id and checks that the topic has it. It
// returns the topic ID as well (see topicMeta).
func (s *Stream) partition(ctx context.Context, op, partition string) (int32, [16]byte, error) {
	p64, err := strconv.ParseInt(partition, 10, 32)
	if err != nil || p64 < 0 {
		return 0, [16]byte{}, &brokers.Error{Op: op, Err: fmt.Errorf("partition %q: %w", partition, brokers.ErrUnknownPartition)}
	}
	p := int32(p64)
	ids, topicID, err := s.topicMeta(ctx, op)
	if err != nil {
		return 0, [16]byte{}, err
	}
	if !slices.Contains(ids, p) {
		return 0, [16]byte{}, &brokers.Error{Op: op, Err: fmt.Errorf("topic %s partition %d: %w", s.cfg.Topic, p, brokers.ErrUnknownPartition)}
	}
	return p, topicID, nil
}

// Open returns a reader of partition positioned at start. It checks the
// partition exists and resolves the start against the partition's offsets
// now: After is checked against the log start and end (ErrPositionGone when
// the next record was deleted, ErrPositionUnknown when it lies beyond the
// end), At is looked up by timestamp, Latest is fixed at the end (the last
// stable offset when read_committed) as of this call. Earliest starts at
// the log start when the reader first fetches.
func (s *Stream) Open(ctx context.Context, partition string, start brokers.Start) (brokers.Reader, error) {
	const op = "open"
	var after int64 = -1
	if start.After != "" {
		var err error
		if after, err = strconv.ParseInt(start.After, 10, 64); err != nil || after < 0 {
			return nil, &brokers.Error{Op: op, Err: fmt.Errorf("position %q is not a Kafka offset", start.After)}
		}
	}
	p, topicID, err := s.partition(ctx, op, partition)
	if err != nil {
		return nil, err
	}
	if id := topicIDString(topicID); start.StreamID != "" && id != "" && id != start.StreamID {
		return nil, &brokers.Error{Op: op, Err: fmt.Errorf("partition %d: topic %s was deleted and created again since the checkpoint (topic id %s, the checkpoint's %s), so its offsets were reused: %w",
			p, s.cfg.Topic, id, start.StreamID, brokers.ErrPositionUnknown)}
	}

	// next is the offset of the first record the reader returns; -1 for
	// Earliest, where the client finds the log start itself.
	next := int64(-1)
	switch {
	case start.After != "":
		lo, hi, err := s.bounds(ctx, op, p)
		if err != nil {
			return nil, err
		}
		next = after + 1
		if next < lo {
			return nil, &brokers.Error{Op: op, Err: fmt.Errorf("partition %d after offset %d, oldest held is %d: %w", p, after, lo, brokers.ErrPositionGone)}
		}
		if next > hi {
			return nil, &brokers.Error{Op: op, Err: fmt.Errorf("partition %d after offset %d, beyond the log end %d (topic deleted and created again, or truncated by an unclean leader election?): %w",
				p, after, hi, brokers.ErrPositionUnknown)}
		}
	case !start.At.IsZero():
		if next, err = s.offsetAt(ctx, op, p, start.At); err != nil {
			return nil, err
		}
	case start.Mode == brokers.Latest:
		if next, err = s.listOne(ctx, op, p, s.endLister()); err != nil {
			return nil, err
		}
	}
	offset := kgo.NewOffset().AtStart()
	if next >= 0 {
		offset = kgo.NewOffset().At(next)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, &brokers.Error{Op: op, Err: brokers.ErrClosed}
	}
	c, err := s.consumerFor(p)
	if err != nil {
		return nil, &brokers.Error{Op: op, Err: errors.New(err.Error())}
	}
	r := &Reader{s: s, c: c, buf: c.add(p, offset), partition: p, topicID: topicID, done: make(chan struct{}),
		next: next, end: -1, lastData: -1, afterData: -1}
	s.readers[r] = struct{}{}
	s.log.Debug("kafka reader opened", "partition", p, "after", start.After, "at", start.At, "mode", start.Mode, "offset", next)
	return r, nil
}

// consumerFor returns the shared client a new reader of partition p
// fetches from: the first that does not consume p already, started when
// there is none. A client consumes a partition at most once, so a second
// reader of a partition whose first is still open (a unit's reader closed
// late, a test) gets a client of its own, closed with its last reader.
// Called with s.mu held.
func (s *Stream) consumerFor(p int32) (*consumer, error) {
	for _, c := range s.consumers {
		if !c.busy(p) {
			return c, nil
		}
	}
	c, err := newConsumer(s)
	if err != nil {
		return nil, err
	}
	s.consumers = append(s.consumers, c)
	return c, nil
}

// retire closes c when it is not the stream's first client and no reader
// uses it any more.
func (s *Stream) retire(c *consumer) {
	s.mu.Lock()
	i := slices.Index(s.consumers, c)
	if i <= 0 || !c.empty() {
		s.mu.Unlock()
		return
	}
	s.consumers = slices.Delete(s.consumers, i, i+1)
	s.mu.Unlock()
	c.close()
}

var _ brokers.Resolver = (*Stream)(nil)

// Resolve turns a start mode into a concrete start of partition, as of
// this call: Earliest is after the record before the log start (or the
// very beginning when nothing was ever removed from the front), Latest is
// after the record before the end, where the end is the last stable offset
// when read_committed (a record of a transaction still open is not skipped
// if it commits) and the high watermark when read_uncommitted. An empty
// partition resolves to the beginning.
func (s *Stream) Resolve(ctx context.Context, partition string, mode brokers.StartMode) (brokers.Start, error) {
	const op = "resolve"
	var list listing
	switch mode {
	case brokers.Earliest:
		list = startListing
	case brokers.Latest:
		list = s.endLister()
	default:
		return brokers.Start{}, &brokers.Error{Op: op, Err: fmt.Errorf("unknown start mode %d", mode)}
	}
	p, _, err := s.partition(ctx, op, partition)
	if err != nil {
		return brokers.Start{}, err
	}
	off, err := s.listOne(ctx, op, p, list)
	if err != nil {
		return brokers.Start{}, err
	}
	if off <= 0 {
		return brokers.Start{Mode: brokers.Earliest}, nil
	}
	return brokers.Start{After: strconv.FormatInt(off-1, 10)}, nil
}

// Committed records in the CommitToGroup consumer group that everything up
// to and including position of partition is applied, so that broker-side
// lag tools see drover's progress. The group's offset is the next offset to
// read: position+1, or further when a reader of partition returned position
// as its last record and then stepped past control records (transaction
// markers) that follow it, so that a partition read to its end shows lag 0
// (see the package doc). Call it after the store committed; drover never
// reads it back.
func (s *Stream) Committed(ctx context.Context, partition, position string) error {
	const op = "commit to group"
	if s.cfg.CommitToGroup == "" {
		return &brokers.Error{Op: op, Err: errors.New("no commit_to_group configured")}
	}
	if err := s.closedErr(op); err != nil {
		return err
	}
	p, err := strconv.ParseInt(partition, 10, 32)
	if err != nil || p < 0 {
		return &brokers.Error{Op: op, Err: fmt.Errorf("partition %q: %w", partition, brokers.ErrUnknownPartition)}
	}
	off, err := strconv.ParseInt(position, 10, 64)
	if err != nil || off < 0 {
		return &brokers.Error{Op: op, Err: fmt.Errorf("position %q is not a Kafka offset", position)}
	}
	at := max(off+1, s.nextAfter(int32(p), off))
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: s.cfg.Topic, Partition: int32(p), At: at, LeaderEpoch: -1})
	rctx, cancel := s.requestCtx(ctx)
	defer cancel()
	resp, err := s.adm.CommitOffsets(rctx, s.cfg.CommitToGroup, os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return translate(ctx, op, fmt.Errorf("group %s partition %d offset %d: %w", s.cfg.CommitToGroup, p, at, err))
	}
	return nil
}

// nextAfter returns where the next fetch of partition p starts after the
// record at offset off, as a reader that returned off as its last record
// knows it; -1 when no open reader knows.
func (s *Stream) nextAfter(p int32, off int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := int64(-1)
	for r := range s.readers {
		if r.partition == p {
			next = max(next, r.nextAfter(off))
		}
	}
	return next
}

// Close closes every reader, the shared clients and the admin client;
// fetches in flight return brokers.ErrClosed. It waits for the clients'
// goroutines and the poll loops. Closing twice is harmless.
func (s *Stream) Close() error {
	readers, first := lifetime.ShutAll(&s.mu, &s.closed, s.readers)
	if !first {
		return nil
	}
	for _, r := range readers {
		r.close(false)
	}
	s.mu.Lock()
	consumers := s.consumers
	s.consumers = nil
	s.mu.Unlock()
	for _, c := range consumers {
		c.close()
	}
	s.endLife()
	s.meta.close()
	s.admin.Close()
	return nil
}

var _ brokers.Seeker = (*Stream)(nil)

// PositionAt is the start of partition at its first record stamped at or
// after t (brokers.Seeker), by ListOffsets with the timestamp: after the
// offset before that record, the very beginning when it is offset 0, after
// the newest record when none is that late.
func (s *Stream) PositionAt(ctx context.Context, partition string, t time.Time) (brokers.Start, error) {
	const op = "position at"
	p, _, err := s.partition(ctx, op, partition)
	if err != nil {
		return brokers.Start{}, err
	}
	next, err := s.offsetAt(ctx, op, p, t)
	if err != nil {
		return brokers.Start{}, err
	}
	if next <= 0 {
		return brokers.Start{Mode: brokers.Earliest}, nil
	}
	return brokers.Start{After: strconv.FormatInt(next-1, 10)}, nil
}
