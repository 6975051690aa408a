package kinesis

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmw "github.com/aws/aws-sdk-go-v2/aws/middleware"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/internal/awsutil"
	"github.com/drover-dev/drover/brokers/internal/lifetime"
	"github.com/drover-dev/drover/brokers/internal/open"
)

// Operation names in the errors of this package (brokers.Error.Op).
const (
	OpConnect    = "connect"
	OpPartitions = "list shards"
	OpOpen       = "open shard"
	OpResolve    = "resolve start"
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

var (
	_ brokers.Stream   = (*Stream)(nil)
	_ brokers.Resolver = (*Stream)(nil)
)

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
		SecretAccessKey: cfg.SecretAccessKey.Reveal(), SessionToken: cfg.SessionToken.Reveal(), ResponseHeaderTimeout: 30 * time.Second})
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
	closing := s.ctx
	if r != nil {
		closing = r.ctx
	}
	cctx, end := awsutil.Begin(ctx, closing, &s.calls)
	return cctx, end, nil
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

// Resolve turns mode into a concrete start of shard partition
// (brokers.Resolver). Kinesis cannot name the position before a shard's
// first record, nor its newest sequence number, so:
//
//   - Earliest is Start{Mode: Earliest}: TRIM_HORIZON, every record the
//     shard holds when it is opened.
//   - Latest is Start{At: t}, t = the server's time of the call (the Date
//     of its answer) less ServerClockMargin, or, when the answer has no
//     Date, the local time before the call less LocalClockMargin. Every
//     record written after Resolve returns is stamped later than t and is
//     read; the records of the last second or two before the call are read
//     too (skipping a record is not acceptable, re-reading a little
//     backlog is).
//
// Resolve calls GetShardIterator (whose iterator it drops) to learn the
// server's time and that the shard exists: a shard the stream does not
// list is brokers.ErrUnknownPartition.
func (s *Stream) Resolve(ctx context.Context, partition string, mode brokers.StartMode) (brokers.Start, error) {
	if mode != brokers.Earliest && mode != brokers.Latest {
		return brokers.Start{}, &brokers.Error{Op: OpResolve, Err: fmt.Errorf("unknown start mode %d", mode)}
	}
	cctx, end, err := s.begin(ctx, OpResolve, nil)
	if err != nil {
		return brokers.Start{}, err
	}
	defer end()
	in := &awskinesis.GetShardIteratorInput{ShardId: aws.String(partition), ShardIteratorType: kintypes.ShardIteratorTypeTrimHorizon}
	if mode == brokers.Latest {
		in.ShardIteratorType = kintypes.ShardIteratorTypeLatest
	}
	s.name(&in.StreamName, &in.StreamARN)
	sent := time.Now()
	out, err := s.client.GetShardIterator(cctx, in)
	if err != nil {
		if ctx.Err() != nil || s.ctx.Err() != nil {
			return brokers.Start{}, callError(ctx, s.ctx, OpResolve, err)
		}
		return brokers.Start{}, s.openError(cctx, OpResolve, partition, "", err)
	}
	if mode == brokers.Earliest {
		return brokers.Start{Mode: brokers.Earliest}, nil
	}
	return brokers.Start{At: startTime(out.ResultMetadata, sent)}, nil
}

// Margins of the time a LATEST start is recorded as (Resolve, and a
// reader's LATEST iterator for when it expires).
const (
	// ServerClockMargin is taken off the server's time. The Date header
	// has a resolution of one second and is truncated, so it is not later
	// than the server's time of the call; one second more covers a Date
	// rounded up on the way and the spread between the clocks of the
	// Kinesis hosts that answer the call and stamp later records.
	ServerClockMargin = time.Second
	// LocalClockMargin is taken off the local time when an answer has no
	// Date header (some emulators and proxies): the local clock may be
	// ahead of the server's. A start still later than the server's clock
	// is read from LATEST instead (see Open), which loses the records
	// written between Resolve and Open: the margin is wide to make that
	// unlikely, at the cost of re-reading up to half a minute of backlog
	// when a unit first starts.
	LocalClockMargin = 30 * time.Second
)

// startTime is the time to record for a start at the tip of a shard, from
// the metadata of the answer to a call sent at sent.
func startTime(md middleware.Metadata, sent time.Time) time.Time {
	if t, ok := awsmw.GetServerTime(md); ok && !t.IsZero() {
		return t.Add(-ServerClockMargin).UTC()
	}
	return sent.Add(-LocalClockMargin).UTC()
}

// futureTimestamp reports whether err is Kinesis refusing an AT_TIMESTAMP
// iterator because at is later than its clock.
func futureTimestamp(err error, at time.Time) bool {
	if codeOf(err) != codeInvalidArg {
		return false
	}
	if strings.Contains(err.Error(), "timestampInMillis") {
		return true // "The timestampInMillis parameter cannot be greater than the currentTimestampInMillis."
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) && re.Response != nil {
		if d, perr := http.ParseTime(re.Response.Header.Get("Date")); perr == nil {
			return at.After(d.Add(time.Second))
		}
	}
	return false
}

// positionUnknown is the error for sequence number pos that is not one of
// shard's: why says how Kinesis or the shard's range tells.
func positionUnknown(op, stream, shard, pos, why string) error {
	return &brokers.Error{Op: op, Err: fmt.Errorf("shard %s of stream %s: sequence number %s is not one of the shard's (%s; the stream may have been deleted and created again): %w",
		shard, stream, pos, why, brokers.ErrPositionUnknown)}
}

// Open returns a reader of shard partition positioned at start: after
// Start.After, else at Start.At (AT_TIMESTAMP: the first record whose
// ApproximateArrivalTimestamp is at or after it), else at Start.Mode. It
// gets the shard iterator at once: LATEST is "latest as of Open". A
// Start.At later than the server's clock is read from LATEST (no record
// stamped at or after it can exist yet).
//
// A Start.After that Kinesis refuses for a shard it lists (a sequence
// number of another stream, such as the same stream before it was deleted
// and created again, or of another shard) is brokers.ErrPositionUnknown,
// not retryable.
func (s *Stream) Open(ctx context.Context, partition string, start brokers.Start) (brokers.Reader, error) {
	return open.Reader(s.OpenReader(ctx, partition, start))
}

// OpenReader is Open returning the concrete type.
func (s *Stream) OpenReader(ctx context.Context, partition string, start brokers.Start) (*Reader, error) {
	cctx, end, err := s.begin(ctx, OpOpen, nil)
	if err != nil {
		return nil, err
	}
	defer end()
	r := &Reader{s: s, shard: partition, mode: start.Mode, last: start.After}
	if start.After == "" {
		r.at = start.At
	}
	if err := r.acquire(cctx); err != nil {
		if ctx.Err() != nil || s.ctx.Err() != nil {
			return nil, callError(ctx, s.ctx, OpOpen, err)
		}
		return nil, s.openError(cctx, OpOpen, partition, start.After, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, &brokers.Error{Op: OpOpen, Err: brokers.ErrClosed}
	}
	r.ctx, r.cancel = context.WithCancel(s.ctx)
	return r, nil
}

// openError explains a failed GetShardIterator of operation op, asked
// AT_SEQUENCE_NUMBER seq ("" for another type): a shard the stream does
// not list is brokers.ErrUnknownPartition; an invalid argument for a shard
// it lists, with a sequence number, is brokers.ErrPositionUnknown (the
// stream and shard are the reader's own: the number is what Kinesis
// refuses, e.g. "StartingSequenceNumber ... did not come from this
// stream").
func (s *Stream) openError(ctx context.Context, op, partition, seq string, err error) error {
	code := codeOf(err)
	if code != codeNotFound && code != codeInvalidArg {
		return translate(op, err)
	}
	shards, lerr := s.listShards(ctx)
	if lerr != nil {
		if codeOf(lerr) == codeNotFound {
			return &brokers.Error{Op: op, Err: fmt.Errorf("stream %s: %w", s.label(), ErrStreamNotFound)}
		}
		return translate(op, err)
	}
	for _, sh := range shards {
		if aws.ToString(sh.ShardId) == partition {
			if seq != "" && code == codeInvalidArg {
				return positionUnknown(op, s.label(), partition, seq, "Kinesis: "+apiMessage(err))
			}
			return translate(op, err)
		}
	}
	return &brokers.Error{Op: op, Err: fmt.Errorf("shard %q of stream %s: %w", partition, s.label(), brokers.ErrUnknownPartition)}
}

// Close closes the stream and every reader: calls in flight are cancelled
// and return brokers.ErrClosed; Close waits for them and closes idle
// connections. Closing twice is harmless.
func (s *Stream) Close() error {
	if lifetime.Shut(&s.mu, &s.closed) {
		s.shutdown()
	}
	return nil
}

func (s *Stream) shutdown() {
	s.cancel()
	s.calls.Wait()
	s.transport.CloseIdleConnections()
}

var (
	_ brokers.FromSeeker    = (*Stream)(nil)
	_ brokers.SubPositioner = (*Stream)(nil)
)

// SubPositions is true (brokers.SubPositioner): the user records of a KPL
// aggregate are read at sub-positions "<sequence number>/<index>".
func (s *Stream) SubPositions() bool { return true }

// PositionFrom refuses a seek to a sequence number (brokers.FromSeeker):
// Kinesis numbers are not consecutive, so the number just before one is
// not known without reading the shard, and a made-up one is refused by
// GetShardIterator. Seek after the record before it, or to a time. A
// user record inside a KPL aggregate other than its first ("<seq>/<i>",
// i > 0) is read first after the one before it, "<seq>/<i-1>".
func (s *Stream) PositionFrom(_ context.Context, partition, pos string) (brokers.Start, error) {
	if p, ok := brokers.SubBefore(pos); ok {
		return brokers.Start{After: p}, nil
	}
	return brokers.Start{}, fmt.Errorf("%w: shard %s: Kinesis sequence numbers are not consecutive, so a seek cannot start at %s itself: seek --after the sequence number of the record before it, or --to a time",
		brokers.ErrBadSeek, partition, pos)
}
