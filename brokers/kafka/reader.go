package kafka

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/drover-dev/drover/brokers"
)

// Reader reads one partition with a client of its own. It implements
// brokers.Reader; one goroutine uses it at a time, while Stream.Close may
// close it from another.
type Reader struct {
	s         *Stream
	cl        *kgo.Client
	partition int32

	// Used only by the goroutine calling Fetch.
	next int64 // offset of the next record to return; -1 until known
	hwm  int64 // last high watermark seen; -1 until known
	ends []int // scratch: where each position ends in a fetch's digits

	closed    atomic.Bool
	closeOnce sync.Once
}

var _ brokers.Reader = (*Reader)(nil)

// Fetch returns up to max records. With none buffered it waits up to wait
// for the client's background fetch to bring some, returning as soon as it
// does. wait 0 returns only what is already buffered.
func (r *Reader) Fetch(ctx context.Context, max int, wait time.Duration) (brokers.Result, error) {
	const op = "fetch"
	if max <= 0 {
		return brokers.Result{}, &brokers.Error{Op: op, Err: fmt.Errorf("max %d must be positive", max)}
	}
	if r.closed.Load() {
		return brokers.Result{}, &brokers.Error{Op: op, Err: brokers.ErrClosed}
	}
	if err := ctx.Err(); err != nil {
		return brokers.Result{}, err
	}
	var fetches kgo.Fetches
	if wait <= 0 {
		fetches = r.cl.PollRecords(nil, max) //nolint:staticcheck // nil: only what is buffered
	} else {
		pctx, cancel := context.WithTimeout(ctx, wait)
		fetches = r.cl.PollRecords(pctx, max)
		cancel()
	}
	if r.closed.Load() {
		return brokers.Result{}, &brokers.Error{Op: op, Err: brokers.ErrClosed}
	}

	var (
		msgs     []brokers.Message
		fetchErr error
	)
	fetches.EachError(func(_ string, _ int32, err error) {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return // our wait ended: nothing arrived in time
		}
		if fetchErr == nil {
			fetchErr = err
		}
	})
	ends := r.ends[:0] // where each message's position ends in digits
	if n := fetches.NumRecords(); n > 0 {
		msgs = make([]brokers.Message, 0, n)
	}
	// All positions of the batch are written into one buffer and sliced
	// out of one string: one allocation per fetch instead of one per
	// record.
	var digits []byte
	fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
		if fp.Partition != r.partition {
			return
		}
		if fp.HighWatermark >= 0 {
			r.hwm = fp.HighWatermark
		}
		if digits == nil {
			digits = make([]byte, 0, len(fp.Records)*8)
		}
		for _, rec := range fp.Records {
			if r.next >= 0 && rec.Offset < r.next {
				continue // already returned
			}
			msgs = msgs[:len(msgs)+1] // filled in place: no 160-byte copy per record
			fill(&msgs[len(msgs)-1], rec)
			digits = strconv.AppendInt(digits, rec.Offset, 10)
			ends = append(ends, len(digits))
			r.next = rec.Offset + 1
		}
	})
	all, from := string(digits), 0
	for i, end := range ends {
		msgs[i].Position = all[from:end]
		from = end
	}
	r.ends = ends
	if len(msgs) == 0 && fetchErr != nil {
		if err := ctx.Err(); err != nil {
			return brokers.Result{}, err
		}
		return brokers.Result{}, translate(ctx, op, fmt.Errorf("partition %d: %w", r.partition, fetchErr))
	}
	if fetchErr != nil {
		r.s.log.Debug("kafka fetch returned records and an error", "partition", r.partition, "err", fetchErr)
	}
	lag := int64(-1)
	if r.hwm >= 0 && r.next >= 0 {
		lag = max64(r.hwm-r.next, 0)
	}
	return brokers.Result{Messages: msgs, Lag: lag}, nil
}

// fill converts a record into m, all but its Position. The record's slices
// are handed over: the client does not reuse them.
func fill(m *brokers.Message, rec *kgo.Record) {
	m.Key = rec.Key
	m.Value = rec.Value
	m.Tombstone = rec.Key != nil && rec.Value == nil
	m.Time = rec.Timestamp
	if len(rec.Headers) > 0 {
		m.Headers = make([]brokers.Header, len(rec.Headers))
		for i, h := range rec.Headers {
			m.Headers[i] = brokers.Header{Key: h.Key, Value: h.Value}
		}
	}
}

// Close closes the reader's client. Closing twice is harmless.
func (r *Reader) Close() error {
	r.s.mu.Lock()
	delete(r.s.readers, r)
	r.s.mu.Unlock()
	r.close()
	return nil
}

func (r *Reader) close() {
	r.closeOnce.Do(func() {
		r.closed.Store(true)
		r.cl.Close()
	})
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}
