package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/drover-dev/drover/brokers"
)

// Stream reads one Kafka topic as a brokers.Stream. Safe for concurrent
// use.
type Stream struct {
	cfg   Config
	log   *slog.Logger
	base  []kgo.Opt // connection options shared by every client
	admin *kgo.Client
	adm   *kadm.Client

	mu      sync.Mutex
	readers map[*Reader]struct{}
	closed  bool
}

var _ brokers.Stream = (*Stream)(nil)

// New validates cfg and returns a Stream. It does not connect: the first
// call does, so New succeeds while the brokers are down.
func New(cfg Config) (*Stream, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	base, err := baseOpts(cfg)
	if err != nil {
		return nil, fmt.Errorf("kafka config: %w", err)
	}
	admin, err := kgo.NewClient(base...)
	if err != nil {
		return nil, fmt.Errorf("kafka: new client: %s", err)
	}
	return &Stream{
		cfg:     cfg,
		log:     cfg.Logger.With("topic", cfg.Topic),
		base:    base,
		admin:   admin,
		adm:     kadm.NewClient(admin),
		readers: make(map[*Reader]struct{}),
	}, nil
}

// baseOpts are the options of every client: where and how to connect.
func baseOpts(cfg Config) ([]kgo.Opt, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ClientID(cfg.ClientID),
		kgo.RetryTimeout(cfg.RequestTimeout),
		kgo.DialTimeout(min(cfg.RequestTimeout, DefaultRequestTimeout)),
		kgo.WithLogger(kgoLogger{cfg.Logger}),
	}
	tc, err := cfg.TLS.tlsConfig()
	if err != nil {
		return nil, err
	}
	if tc != nil {
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	switch cfg.SASL.Mechanism {
	case MechanismPlain:
		opts = append(opts, kgo.SASL(plain.Auth{User: cfg.SASL.User, Pass: cfg.SASL.Password}.AsMechanism()))
	case MechanismSCRAMSHA256:
		opts = append(opts, kgo.SASL(scram.Auth{User: cfg.SASL.User, Pass: cfg.SASL.Password}.AsSha256Mechanism()))
	case MechanismSCRAMSHA512:
		opts = append(opts, kgo.SASL(scram.Auth{User: cfg.SASL.User, Pass: cfg.SASL.Password}.AsSha512Mechanism()))
	}
	return opts, nil
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
	if err := s.closedErr(op); err != nil {
		return nil, err
	}
	rctx, cancel := s.requestCtx(ctx)
	defer cancel()
	// A metadata request of our own, not kadm's ListTopics: kadm answers
	// from the client's cache for up to MetadataMinAge, which would hide
	// both new partitions and a broker that is down.
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(s.cfg.Topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(rctx, s.admin)
	if err == nil {
		err = kerr.UnknownTopicOrPartition
		for _, t := range resp.Topics {
			if t.Topic == nil || *t.Topic != s.cfg.Topic {
				continue
			}
			if err = kerr.ErrorForCode(t.ErrorCode); err != nil {
				break
			}
			ids := make([]int32, 0, len(t.Partitions))
			for _, p := range t.Partitions {
				ids = append(ids, p.Partition)
			}
			slices.Sort(ids)
			return ids, nil
		}
	}
	if cerr := s.closedErr(op); cerr != nil {
		return nil, cerr
	}
	return nil, translate(ctx, op, fmt.Errorf("topic %s: %w", s.cfg.Topic, err))
}

// Open returns a reader of partition positioned at start. It checks the
// partition exists and resolves the start against the partition's offsets
// now: After is checked against the log start and end (ErrPositionGone when
// the next message was deleted), Latest is fixed at the end as of this call.
// Earliest starts at the log start when the reader first fetches.
func (s *Stream) Open(ctx context.Context, partition string, start brokers.Start) (brokers.Reader, error) {
	const op = "open"
	p64, err := strconv.ParseInt(partition, 10, 32)
	if err != nil || p64 < 0 {
		return nil, &brokers.Error{Op: op, Err: fmt.Errorf("partition %q: %w", partition, brokers.ErrUnknownPartition)}
	}
	p := int32(p64)
	var after int64 = -1
	if start.After != "" {
		if after, err = strconv.ParseInt(start.After, 10, 64); err != nil || after < 0 {
			return nil, &brokers.Error{Op: op, Err: fmt.Errorf("position %q is not a Kafka offset", start.After)}
		}
	}
	ids, err := s.partitionIDs(ctx, op)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(ids, p) {
		return nil, &brokers.Error{Op: op, Err: fmt.Errorf("topic %s partition %d: %w", s.cfg.Topic, p, brokers.ErrUnknownPartition)}
	}

	var offset kgo.Offset
	hwm := int64(-1)
	if start.After == "" && start.Mode == brokers.Earliest {
		offset = kgo.NewOffset().AtStart()
	} else {
		lo, hi, err := s.bounds(ctx, op, p)
		if err != nil {
			return nil, err
		}
		hwm = hi
		next := hi
		if start.After != "" {
			next = after + 1
			if next < lo {
				return nil, &brokers.Error{Op: op, Err: fmt.Errorf("partition %d after offset %d, oldest held is %d: %w", p, after, lo, brokers.ErrPositionGone)}
			}
			if next > hi {
				return nil, &brokers.Error{Op: op, Err: fmt.Errorf("partition %d after offset %d, beyond the end %d (topic recreated or truncated?): %w", p, after, hi, brokers.ErrPositionGone)}
			}
		}
		offset = kgo.NewOffset().At(next)
	}

	opts := append(slices.Clip(s.base),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{s.cfg.Topic: {p: offset}}),
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
		kgo.FetchMaxBytes(s.cfg.FetchMaxBytes),
		kgo.FetchMaxPartitionBytes(s.cfg.FetchMaxPartitionBytes),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, &brokers.Error{Op: op, Err: errors.New(err.Error())}
	}
	r := &Reader{s: s, cl: cl, partition: p, next: after + 1, hwm: hwm}
	if start.After == "" {
		r.next = -1 // known at the first record
		if start.Mode == brokers.Latest {
			r.next = hwm
		}
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		cl.Close()
		return nil, &brokers.Error{Op: op, Err: brokers.ErrClosed}
	}
	s.readers[r] = struct{}{}
	s.mu.Unlock()
	s.log.Debug("kafka reader opened", "partition", p, "after", start.After, "mode", start.Mode)
	return r, nil
}

// bounds returns partition p's log start offset and high watermark.
func (s *Stream) bounds(ctx context.Context, op string, p int32) (lo, hi int64, err error) {
	rctx, cancel := s.requestCtx(ctx)
	defer cancel()
	starts, err := s.adm.ListStartOffsets(rctx, s.cfg.Topic)
	if err != nil {
		return 0, 0, translate(ctx, op, err)
	}
	ends, err := s.adm.ListEndOffsets(rctx, s.cfg.Topic)
	if err != nil {
		return 0, 0, translate(ctx, op, err)
	}
	so, ok1 := starts.Lookup(s.cfg.Topic, p)
	eo, ok2 := ends.Lookup(s.cfg.Topic, p)
	switch {
	case !ok1 || !ok2:
		return 0, 0, &brokers.Error{Op: op, Retryable: true, Err: fmt.Errorf("partition %d: offsets not listed", p)}
	case so.Err != nil:
		return 0, 0, translate(ctx, op, so.Err)
	case eo.Err != nil:
		return 0, 0, translate(ctx, op, eo.Err)
	}
	return so.Offset, eo.Offset, nil
}

// Committed records in the CommitToGroup consumer group that everything up
// to and including position of partition is applied (the group's offset is
// position+1, the next to read), so that broker-side lag tools see drover's
// progress. Call it after the store committed; drover never reads it back.
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
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: s.cfg.Topic, Partition: int32(p), At: off + 1, LeaderEpoch: -1})
	rctx, cancel := s.requestCtx(ctx)
	defer cancel()
	resp, err := s.adm.CommitOffsets(rctx, s.cfg.CommitToGroup, os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return translate(ctx, op, fmt.Errorf("group %s partition %d offset %d: %w", s.cfg.CommitToGroup, p, off+1, err))
	}
	return nil
}

// Close closes every reader and the stream's admin client; fetches in
// flight return brokers.ErrClosed. It waits for the clients' goroutines.
// Closing twice is harmless.
func (s *Stream) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	readers := make([]*Reader, 0, len(s.readers))
	for r := range s.readers {
		readers = append(readers, r)
	}
	clear(s.readers)
	s.mu.Unlock()
	for _, r := range readers {
		r.close()
	}
	s.admin.Close()
	return nil
}
