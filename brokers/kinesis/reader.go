package kinesis

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/internal/lifetime"
	"github.com/drover-dev/drover/internal/exec"
)

// Reader reads one shard in sequence-number order. It implements
// brokers.Reader. A Reader is used by one goroutine at a time; Close may
// come from another.
type Reader struct {
	s     *Stream
	shard string
	mode  brokers.StartMode

	// ctx is cancelled by Close (or the stream's Close).
	ctx    context.Context
	cancel context.CancelFunc
	// closed is guarded by s.mu.
	closed bool

	// Owned by the goroutine that calls Fetch.
	iter     string            // shard iterator for the next GetRecords; "" to acquire one
	last     string            // sequence number of the last record taken, or Start.After (a sub-position too)
	at       time.Time         // before any record: start at the first record stamped at or after this (Start.At, or when LATEST was taken)
	verify   string            // the first record must be this one (and is dropped), else the position is gone
	skipSub  int               // with verify: the index of the last user record of its aggregate already applied (those after it are kept); -1: drop it whole
	pending  []brokers.Message // messages taken but not returned yet: a Fetch returns at most max, an aggregate may hold more
	users    []userRecord      // scratch for deaggregate
	next     time.Time         // no GetRecords before this (pacing, throttling)
	backoff  time.Duration     // current pause after a throughput refusal
	throttle error             // the last GetRecords was refused for throughput
	lag      int64             // 0 when the last GetRecords said MillisBehindLatest 0 (caught up), else -1: Kinesis does not count records
	oldest   time.Time         // the local time of the last GetRecords less its MillisBehindLatest; zero when unknown or caught up
	ended    bool              // the shard is closed and every record was taken (pending may still hold some)
	failed   error             // the position to read after is gone or unknown: every Fetch returns it
}

var _ brokers.Reader = (*Reader)(nil)

// acquire gets a shard iterator for where the reader is:
//
//   - after a sequence number (Start.After, or the last record returned):
//     AT_SEQUENCE_NUMBER that number, whose record the next GetRecords
//     must return first (it is dropped). When it returns a later record
//     instead, the position was trimmed: brokers.ErrPositionGone. This is
//     how the reader tells a trimmed position from a live one; an
//     AFTER_SEQUENCE_NUMBER iterator would silently start at the trim
//     horizon.
//   - at a time (Start.At, or when a LATEST iterator was taken, once that
//     iterator expired before any record came): AT_TIMESTAMP. When Kinesis
//     refuses the time as later than its own clock, no record stamped at or
//     after it exists yet, and LATEST reads every record that will be: the
//     reader takes LATEST instead, and its time becomes the server's.
//   - Earliest: TRIM_HORIZON.
//   - Latest (not resolved, Start.At zero): LATEST, whose server time is
//     kept for an AT_TIMESTAMP after an expiry, so that records that
//     arrived meanwhile are not skipped.
func (r *Reader) acquire(ctx context.Context) error {
	in := &awskinesis.GetShardIteratorInput{ShardId: aws.String(r.shard)}
	r.s.name(&in.StreamName, &in.StreamARN)
	verify, skipSub := "", -1
	switch {
	case r.last != "":
		verify, skipSub = brokers.SplitPosition(r.last)
		in.ShardIteratorType = kintypes.ShardIteratorTypeAtSequenceNumber
		in.StartingSequenceNumber = aws.String(verify)
	case !r.at.IsZero():
		in.ShardIteratorType = kintypes.ShardIteratorTypeAtTimestamp
		in.Timestamp = aws.Time(r.at)
	case r.mode == brokers.Latest:
		in.ShardIteratorType = kintypes.ShardIteratorTypeLatest
	default:
		in.ShardIteratorType = kintypes.ShardIteratorTypeTrimHorizon
	}
	sent := time.Now()
	out, err := r.s.client.GetShardIterator(ctx, in)
	if err != nil && in.ShardIteratorType == kintypes.ShardIteratorTypeAtTimestamp && futureTimestamp(err, r.at) {
		r.s.cfg.Logger.Info("kinesis start time is later than the server's clock; reading from the shard's latest record",
			"shard", r.shard, "at", r.at)
		in.ShardIteratorType, in.Timestamp = kintypes.ShardIteratorTypeLatest, nil
		sent = time.Now()
		out, err = r.s.client.GetShardIterator(ctx, in)
	}
	if err != nil {
		return err
	}
	if in.ShardIteratorType == kintypes.ShardIteratorTypeLatest {
		r.at = startTime(out.ResultMetadata, sent)
	}
	r.iter = aws.ToString(out.ShardIterator)
	r.verify, r.skipSub = verify, skipSub
	return nil
}

// Fetch returns up to max records after the reader's position. GetRecords
// answers at once, so Fetch polls, at most once per Config.PollInterval
// (waiting through exec.Wait), until records arrive or wait has passed; it
// makes at least one call when the interval allows. Kinesis does not
// count records: Result.Lag is 0 when MillisBehindLatest is 0 (caught
// up), -1 otherwise, and Result.Oldest is the time of the call less
// MillisBehindLatest, the age of the records not returned yet. When the shard is closed
// (split or merged) and its last records were returned, Result.End is set,
// with those records; later fetches return End at once.
//
// A ProvisionedThroughputExceededException pauses the reader (1 s, doubling
// up to 10 s) and is retried within the wait; when the wait ends first,
// Fetch returns it as a retryable *brokers.Error. An expired iterator is
// replaced inside the reader, from the last record returned.
func (r *Reader) Fetch(ctx context.Context, max int, wait time.Duration) (brokers.Result, error) {
	if max <= 0 {
		return brokers.Result{}, &brokers.Error{Op: OpFetch, Err: fmt.Errorf("max %d must be positive", max)}
	}
	cctx, end, err := r.s.begin(ctx, OpFetch, r)
	if err != nil {
		return brokers.Result{}, err
	}
	defer end()
	if r.failed != nil {
		return brokers.Result{}, r.failed
	}
	if len(r.pending) > 0 {
		return r.drain(max), nil
	}
	if r.ended {
		return brokers.Result{End: true}, nil
	}
	cfg := r.s.cfg
	start := time.Now()
	var paused time.Duration // waited through exec.Wait (counts under a virtual clock too)
	left := func() time.Duration { return wait - maxDuration(time.Since(start), paused) }
	expired := 0
	for {
		if d := time.Until(r.next); d > 0 {
			if l := left(); d > l {
				// No call fits in what is left of the wait.
				if l > 0 {
					if err := exec.Wait(cctx, l, nil); err != nil {
						return brokers.Result{}, callError(ctx, r.ctx, OpFetch, err)
					}
				}
				if r.throttle != nil {
					return brokers.Result{}, r.throttle
				}
				return brokers.Result{Lag: r.lag, Oldest: r.oldest}, nil
			}
			if err := exec.Wait(cctx, d, nil); err != nil {
				return brokers.Result{}, callError(ctx, r.ctx, OpFetch, err)
			}
			paused += d
		}
		if r.iter == "" {
			if err := r.acquire(cctx); err != nil {
				if ctx.Err() != nil || r.ctx.Err() != nil {
					return brokers.Result{}, callError(ctx, r.ctx, OpFetch, err)
				}
				err = r.s.openError(cctx, OpFetch, r.shard, r.last, err)
				if errors.Is(err, brokers.ErrPositionUnknown) {
					r.failed = err
				}
				return brokers.Result{}, err
			}
		}
		limit := min(max, cfg.MaxRecords)
		if r.verify != "" {
			limit = min(max+1, cfg.MaxRecords)
		}
		r.next = time.Now().Add(cfg.PollInterval)
		out, err := r.s.client.GetRecords(cctx, &awskinesis.GetRecordsInput{ShardIterator: aws.String(r.iter), Limit: aws.Int32(int32(limit))}, noRetries)
		if err != nil {
			if ctx.Err() != nil || r.ctx.Err() != nil {
				return brokers.Result{}, callError(ctx, r.ctx, OpFetch, err)
			}
			switch codeOf(err) {
			case codeExpired:
				expired++
				if expired > 1 {
					return brokers.Result{}, translate(OpFetch, err)
				}
				cfg.Logger.Info("kinesis shard iterator expired; acquiring a new one", "shard", r.shard, "after", r.last)
				r.iter = ""
				continue
			case codeThroughput, codeKMSThrottle:
				r.backoff = min(maxDuration(2*r.backoff, cfg.ThrottleBackoff), MaxThrottleBackoff)
				r.next = time.Now().Add(r.backoff)
				r.throttle = translate(OpFetch, err)
				continue
			}
			return brokers.Result{}, translate(OpFetch, err)
		}
		r.backoff, r.throttle = 0, nil
		err = r.take(out)
		var miss *missing
		if errors.As(err, &miss) {
			return brokers.Result{}, r.positionLost(cctx, ctx, miss.oldest)
		}
		if err != nil {
			return brokers.Result{}, err
		}
		if res := r.drain(max); len(res.Messages) > 0 || res.End || left() <= 0 {
			return res, nil
		}
	}
}

// noRetries turns the SDK's own retries off for GetRecords: the reader
// paces its calls and backs off from throttling itself, and a lost
// connection is a retryable error for drover to retry.
func noRetries(o *awskinesis.Options) { o.RetryMaxAttempts = 1 }

// take turns a GetRecords answer into messages, appended to r.pending,
// and moves the reader on. A KPL aggregate becomes its user records, at
// sub-positions "<sequence number>/<index>" (brokers.SubPosition), each
// with its own partition key and explicit hash key (a header); a corrupt
// one stays one message at its sequence number, rejected with the reason
// (brokers.Message.Reject). The record to start after (verify) is dropped,
// or, for a sub-position, the user records up to it; a sub-position the
// record does not have is brokers.ErrPositionUnknown (noSub).
func (r *Reader) take(out *awskinesis.GetRecordsOutput) error {
	r.lag, r.oldest = -1, time.Time{}
	if out.MillisBehindLatest != nil {
		if ms := *out.MillisBehindLatest; ms <= 0 {
			r.lag = 0
		} else {
			r.oldest = time.Now().Add(-time.Duration(ms) * time.Millisecond)
		}
	}
	for _, rec := range out.Records {
		seq := aws.ToString(rec.SequenceNumber)
		skip := -1 // user records of an aggregate up to this index are already applied
		if r.verify != "" {
			switch c := brokers.ComparePositions(seq, r.verify); {
			case c < 0:
				continue // before the position: already applied
			case c == 0:
				r.verify = ""
				if r.skipSub < 0 {
					r.last = seq
					continue // the position itself: already applied
				}
				skip = r.skipSub
			default:
				return &missing{oldest: seq}
			}
		}
		m := brokers.Message{Position: seq, Key: []byte(aws.ToString(rec.PartitionKey)), Value: rec.Data}
		if rec.ApproximateArrivalTimestamp != nil {
			m.Time = *rec.ApproximateArrivalTimestamp
		}
		r.last = seq
		if !isAggregate(rec.Data) {
			if skip >= 0 {
				return r.noSub(seq, skip, "the record is not a KPL aggregate")
			}
			r.pending = append(r.pending, m)
			continue
		}
		users, err := deaggregate(rec.Data, r.users[:0])
		r.users = users[:0]
		switch {
		case err != nil && skip >= 0:
			return r.noSub(seq, skip, "the record is a corrupt KPL aggregate: "+err.Error())
		case skip >= len(users):
			return r.noSub(seq, skip, fmt.Sprintf("its aggregate holds %d user records", len(users)))
		}
		if err != nil {
			r.s.cfg.Logger.Warn("kinesis record is a corrupt KPL aggregate; it is dead-lettered whole",
				"shard", r.shard, "sequence_number", seq, "error", err)
			m.Reject = err.Error()
			r.pending = append(r.pending, m)
			continue
		}
		for i, u := range users[skip+1:] {
			um := brokers.Message{Position: brokers.SubPosition(seq, skip+1+i), Key: u.partitionKey, Value: u.data, Time: m.Time}
			if u.explicitHashKey != nil {
				um.Headers = []brokers.Header{{Key: HeaderExplicitHashKey, Value: u.explicitHashKey}}
			}
			r.pending = append(r.pending, um)
		}
	}
	if aws.ToString(out.NextShardIterator) == "" {
		// Closed shard, read to its end.
		if r.verify != "" {
			return &missing{}
		}
		r.iter, r.ended = "", true
		return nil
	}
	r.iter = aws.ToString(out.NextShardIterator)
	return nil
}

// noSub records and returns brokers.ErrPositionUnknown for a start after
// the sub-position seq/sub that record seq does not have (a plain record,
// or an index past its aggregate's end): reading on would skip the record
// (ComparePositions puts the whole record after each of its
// sub-positions) or the rest of the aggregate with no word said.
func (r *Reader) noSub(seq string, sub int, why string) error {
	r.pending, r.iter = nil, ""
	r.failed = &brokers.Error{Op: OpFetch, Err: fmt.Errorf("shard %s: the position %s is not a user record of sequence number %s (%s): %w",
		r.shard, brokers.SubPosition(seq, sub), seq, why, brokers.ErrPositionUnknown)}
	return r.failed
}

// drain returns up to max of the messages taken and not returned yet. Lag
// counts the ones left when the shard is caught up, Oldest is the time of
// the next one, and End is set with the last message of a closed shard.
func (r *Reader) drain(max int) brokers.Result {
	n := min(max, len(r.pending))
	res := brokers.Result{Messages: r.pending[:n:n], Lag: r.lag, Oldest: r.oldest}
	r.pending = r.pending[n:]
	switch {
	case len(r.pending) == 0:
		r.pending = nil
		if r.ended {
			res.End, res.Lag, res.Oldest = true, 0, time.Time{}
		}
	case r.lag == 0 || r.ended:
		res.Lag, res.Oldest = int64(len(r.pending)), r.pending[0].Time
	default:
		res.Oldest = r.pending[0].Time
	}
	if len(res.Messages) == 0 {
		res.Messages = nil
	}
	return res
}

// missing is what take reports when the record the reader must start
// after is not the first one GetRecords returned: oldest is the record
// returned instead, "" when the closed shard returned none.
type missing struct{ oldest string }

func (m *missing) Error() string { return "kinesis: the record to start after is missing" }

// positionLost records and returns why the record the reader must start
// after (r.verify) is not in the shard: brokers.ErrPositionUnknown when the
// number lies outside the shard's sequence number range (before its first
// number, or after the last of a closed shard: it never was one of this
// shard's), else brokers.ErrPositionGone (trimmed: records after it may
// have been lost before drover read them). When the shard cannot be listed
// the reader says nothing final and tries again on the next Fetch.
func (r *Reader) positionLost(ctx, callerCtx context.Context, oldest string) error {
	pos := r.verify
	r.iter = ""
	shards, err := r.s.listShards(ctx)
	if err != nil {
		return callError(callerCtx, r.ctx, OpFetch, err)
	}
	for _, sh := range shards {
		if aws.ToString(sh.ShardId) != r.shard || sh.SequenceNumberRange == nil {
			continue
		}
		first, last := aws.ToString(sh.SequenceNumberRange.StartingSequenceNumber), aws.ToString(sh.SequenceNumberRange.EndingSequenceNumber)
		switch {
		case first != "" && brokers.ComparePositions(pos, first) < 0:
			r.failed = positionUnknown(OpFetch, r.s.label(), r.shard, pos, "it is before the shard's first sequence number "+first)
			return r.failed
		case last != "" && brokers.ComparePositions(pos, last) > 0:
			r.failed = positionUnknown(OpFetch, r.s.label(), r.shard, pos, "it is after the closed shard's last sequence number "+last)
			return r.failed
		}
	}
	held := "no record"
	if oldest != "" {
		held = "the oldest held is " + oldest
	}
	r.failed = &brokers.Error{Op: OpFetch, Err: fmt.Errorf("shard %s: the record at %s is no longer held (%s): %w", r.shard, pos, held, brokers.ErrPositionGone)}
	return r.failed
}

// Close releases the reader and cancels its fetch in flight. Closing twice
// is harmless.
func (r *Reader) Close() error {
	lifetime.Shut(&r.s.mu, &r.closed)
	r.cancel()
	return nil
}

func maxDuration(a, b time.Duration) time.Duration {
	if a > b {
		return a
	}
	return b
}
