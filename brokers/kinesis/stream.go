package kinesis

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/internal/awsutil"
)

// Operation names in the errors of this package (brokers.Error.Op).
const (
	OpConnect    = "connect"
	OpPartitions = "list shards"
	OpOpen       = "open shard"
	OpFetch      = "fetch"
)

// Stream is one Kinesis data stream, read shard by shard with drover
// keeping the sequence numbers. It implements brokers.Stream and is safe
// for concurrent use.
type Stream struct {
	cfg       Config
	client    *awskinesis.Client
	transport *http.Transport

	// ctx is cancelled by Close: every call in flight runs under a context
	// that ends with it.
	ctx    context.Context
	cancel context.CancelFunc
	calls  sync.WaitGroup

	mu     sync.Mutex
	closed bool
}

var _ brokers.Stream = (*Stream)(nil)

// NewStream connects to the stream cfg names and checks that it exists (a
// *brokers.Error wrapping ErrStreamNotFound when it does not).
func NewStream(ctx context.Context, cfg Config) (*Stream, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	hint := ""
	if cfg.StreamARN != "" {
		hint = regionFromARN(cfg.StreamARN)
	}
	loaded, err := awsutil.Load(ctx, awsutil.Settings{Region: cfg.Region, RegionHint: hint, AccessKeyID: cfg.AccessKeyID,
		SecretAccessKey: cfg.SecretAccessKey, SessionToken: cfg.SessionToken, ResponseHeaderTimeout: 30 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("kinesis: %w", err)
	}
	awsCfg, tr, creds := loaded.Config, loaded.Transport, loaded.Credentials
	client := awskinesis.NewFromConfig(awsCfg, func(o *awskinesis.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
	})
	s := &Stream{cfg: cfg, client: client, transport: tr}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	in := &awskinesis.DescribeStreamSummaryInput{}
	s.name(&in.StreamName, &in.StreamARN)
	if _, err := client.DescribeStreamSummary(ctx, in); err != nil {
		s.shutdown()
		if codeOf(err) == codeNotFound {
			return nil, &brokers.Error{Op: OpConnect, Err: fmt.Errorf("stream %s: %w (%s)", s.label(), ErrStreamNotFound, awsutil.Flatten(err))}
		}
		return nil, fmt.Errorf("kinesis: stream %s: %w", s.label(), translate(OpConnect, err))
	}
	cfg.Logger.Info("kinesis stream opened", "stream", s.label(), "region", awsCfg.Region,
		"endpoint", cfg.Endpoint, "credentials", creds)
	return s, nil
}

// name sets the request's stream name or ARN.
func (s *Stream) name(name, arn **string) {
	if s.cfg.StreamARN != "" {
		*arn = aws.String(s.cfg.StreamARN)
	} else {
		*name = aws.String(s.cfg.StreamName)
	}
}

func (s *Stream) label() string {
	if s.cfg.StreamARN != "" {
		return s.cfg.StreamARN
	}
	return s.cfg.StreamName
}

// begin starts a call: it fails when the stream (or the reader r, when not
// nil) is closed, and otherwise returns a context that ends with ctx or
// when either closes, and the function that ends the call.
func (s *Stream) begin(ctx context.Context, op string, r *Reader) (context.Context, func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || (r != nil && r.closed) {
		return nil, nil, &brokers.Error{Op: op, Err: brokers.ErrClosed}
	}
	s.calls.Add(1)
	closing := s.ctx
	if r != nil {
		closing = r.ctx
	}
	cctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(closing, cancel)
	return cctx, func() {
		stop()
		cancel()
		s.calls.Done()
	}, nil
}

// Partitions lists every shard the stream still holds, closed ones
// included (ListShards, paginated), in the order Kinesis gives them, each
// with its parent and adjacent parent.
func (s *Stream) Partitions(ctx context.Context) ([]brokers.Partition, error) {
	cctx, end, err := s.begin(ctx, OpPartitions, nil)
	if err != nil {
		return nil, err
	}
	defer end()
	shards, err := s.listShards(cctx)
	if err != nil {
		return nil, callError(ctx, s.ctx, OpPartitions, err)
	}
	out := make([]brokers.Partition, 0, len(shards))
	for _, sh := range shards {
		p := brokers.Partition{ID: aws.ToString(sh.ShardId)}
		for _, parent := range []*string{sh.ParentShardId, sh.AdjacentParentShardId} {
			if v := aws.ToString(parent); v != "" {
				p.Parents = append(p.Parents, v)
			}
		}
		out = append(out, p)
	}
	return out, nil
}

func (s *Stream) listShards(ctx context.Context) ([]kintypes.Shard, error) {
	var shards []kintypes.Shard
	in := &awskinesis.ListShardsInput{}
	s.name(&in.StreamName, &in.StreamARN)
	for {
		out, err := s.client.ListShards(ctx, in)
		if err != nil {
			return nil, err
		}
		shards = append(shards, out.Shards...)
		if aws.ToString(out.NextToken) == "" {
			return shards, nil
		}
		// With a NextToken, Kinesis refuses the stream's name.
		in = &awskinesis.ListShardsInput{NextToken: out.NextToken}
	}
}

// Open returns a reader of shard partition positioned at start. It gets
// the shard iterator at once: LATEST is "latest as of Open".
func (s *Stream) Open(ctx context.Context, partition string, start brokers.Start) (brokers.Reader, error) {
	r, err := s.OpenReader(ctx, partition, start)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// OpenReader is Open returning the concrete type.
func (s *Stream) OpenReader(ctx context.Context, partition string, start brokers.Start) (*Reader, error) {
	cctx, end, err := s.begin(ctx, OpOpen, nil)
	if err != nil {
		return nil, err
	}
	defer end()
	r := &Reader{s: s, shard: partition, mode: start.Mode, last: start.After, opened: time.Now()}
	if err := r.acquire(cctx); err != nil {
		if ctx.Err() != nil || s.ctx.Err() != nil {
			return nil, callError(ctx, s.ctx, OpOpen, err)
		}
		return nil, s.openError(cctx, partition, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, &brokers.Error{Op: OpOpen, Err: brokers.ErrClosed}
	}
	r.ctx, r.cancel = context.WithCancel(s.ctx)
	return r, nil
}

// openError explains a failed GetShardIterator: a shard the stream does
// not list is brokers.ErrUnknownPartition.
func (s *Stream) openError(ctx context.Context, partition string, err error) error {
	code := codeOf(err)
	if code != codeNotFound && code != codeInvalidArg {
		return translate(OpOpen, err)
	}
	shards, lerr := s.listShards(ctx)
	if lerr != nil {
		if codeOf(lerr) == codeNotFound {
			return &brokers.Error{Op: OpOpen, Err: fmt.Errorf("stream %s: %w", s.label(), ErrStreamNotFound)}
		}
		return translate(OpOpen, err)
	}
	for _, sh := range shards {
		if aws.ToString(sh.ShardId) == partition {
			return translate(OpOpen, err)
		}
	}
	return &brokers.Error{Op: OpOpen, Err: fmt.Errorf("shard %q of stream %s: %w", partition, s.label(), brokers.ErrUnknownPartition)}
}

// Close closes the stream and every reader: calls in flight are cancelled
// and return brokers.ErrClosed; Close waits for them and closes idle
// connections. Closing twice is harmless.
func (s *Stream) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.shutdown()
	return nil
}

func (s *Stream) shutdown() {
	s.cancel()
	s.calls.Wait()
	s.transport.CloseIdleConnections()
}
