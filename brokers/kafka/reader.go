package kafka

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/internal/lifetime"
)

// Reader reads one partition from its Stream's shared client: the
// client's poll loop routes the partition's records into the reader's
// buffer, and Fetch takes them from there. It implements brokers.Reader
// and brokers.Waker; one goroutine uses it at a time, while Stream.Close
// may close it from another.
type Reader struct {
	s         *Stream
	c         *consumer
	buf       *partBuf
	partition int32
	topicID   [16]byte      // as of Open; zero when the broker has no topic IDs
	done      chan struct{} // closed by close: ends a Fetch in flight

	// Used only by the goroutine calling Fetch.
	next   int64 // offset of the next record to return; -1 until known
	end    int64 // last end seen (LSO, or HWM when read_uncommitted); -1 until known
	failed error // a final error: every later Fetch returns it
	// undecided is an out of range error the bounds could not be listed
	// for; the next Fetch decides it.
	undecided error
	offs      []int64 // scratch: the offsets of a fetch's messages
	// answered is set while failed or undecided is: Fetch answers at
	// once. Wake reads it from any goroutine.
	answered atomic.Bool

	// Read by Stream.Committed from other goroutines.
	hint      sync.Mutex
	lastData  int64 // offset of the last record returned; -1 before any
	afterData int64 // where the next fetch starts after lastData and the control records after it

	closed    atomic.Bool
	closeOnce sync.Once
}

var (
	_ brokers.Reader = (*Reader)(nil)
	_ brokers.Waker  = (*Reader)(nil)
)

// Fetch returns up to max records. With none buffered it waits up to wait
// for the shared client to bring some, returning as soon as it does. wait
// 0 returns only what is already buffered. Control records (transaction
// markers) are never returned: the reader steps past them. max is also
// the reader's batch: the client stops fetching the partition while its
// buffer holds that many records.
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
	if r.failed != nil {
		return brokers.Result{}, r.failed
	}
	if r.undecided != nil {
		// The client stopped fetching at a position error that could not
		// be decided yet (the bounds were not listed): decide it first.
		return brokers.Result{}, r.decide(ctx, r.undecided)
	}

	f := fetchState{r: r, max: max, offs: r.offs[:0]}
	var timer *time.Timer
wait:
	for {
		f.take()
		// Only control records, or nothing: wait on while wait lasts.
		if len(f.msgs) > 0 || f.err != nil || f.posErr != nil || wait <= 0 {
			break
		}
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		}
		select {
		case <-r.buf.notify:
		case <-timer.C:
			break wait
		case <-ctx.Done():
			return brokers.Result{}, ctx.Err()
		case <-r.done:
			break wait
		}
	}
	if r.closed.Load() {
		return brokers.Result{}, &brokers.Error{Op: op, Err: brokers.ErrClosed}
	}
	r.offs = f.offs

	if f.posErr != nil {
		err := r.decide(ctx, f.posErr)
		if len(f.msgs) == 0 {
			return brokers.Result{}, err
		}
		// The records before the error are the partition's: return them,
		// and the error with the next Fetch.
	} else if len(f.msgs) == 0 && f.err != nil {
		if err := ctx.Err(); err != nil {
			return brokers.Result{}, err
		}
		return brokers.Result{}, translate(ctx, op, fmt.Errorf("partition %d: %w", r.partition, f.err))
	} else if f.err != nil {
		r.s.log.Debug("kafka fetch returned records and an error", "partition", r.partition, "err", f.err)
	}

	msgs := f.msgs
	if len(msgs) > 0 {
		// All positions of the batch are written into one buffer and
		// sliced out of one string: one allocation per fetch instead of
		// one per record.
		last := f.offs[len(f.offs)-1]
		digits := make([]byte, 0, len(msgs)*8)
		for i, off := range f.offs {
			digits = strconv.AppendInt(digits, off, 10)
			f.offs[i] = int64(len(digits)) // now where its digits end
		}
		all, from := string(digits), 0
		for i, end := range f.offs {
			msgs[i].Position = all[from:end]
			from = int(end)
		}
		r.hint.Lock()
		r.lastData, r.afterData = last, r.next
		r.hint.Unlock()
	} else if f.stepped {
		r.hint.Lock()
		if r.lastData >= 0 && r.afterData < r.next {
			r.afterData = r.next // control records after the last record returned
		}
		r.hint.Unlock()
	}
	lag := int64(-1)
	if r.end >= 0 && r.next >= 0 {
		lag = max64(r.end-r.next, 0)
	}
	res := brokers.Result{Messages: msgs, Lag: lag}
	if lag != 0 {
		res.Oldest = f.nextTime // zero when the next record is not buffered
	}
	return res, nil
}

// Wake calls f once as soon as Fetch may return something without
// waiting: records (or an error) are buffered, the reader has a decided
// error, or it closed. When that is already so, f runs before Wake
// returns; otherwise the poll loop (or Close) calls it. Safe to call from
// any goroutine, also while a Fetch runs.
func (r *Reader) Wake(f func()) (cancel func()) {
	return r.buf.wake(f, r.closed.Load() || r.answered.Load())
}

// fetchState gathers one Fetch's messages from the buffer.
type fetchState struct {
	r       *Reader
	max     int
	msgs    []brokers.Message
	offs    []int64
	err     error // the first other error seen
	posErr  error // a position error: nothing after it is read
	stepped bool  // a control record moved next
	// nextTime is the timestamp of the data record left in the buffer
	// for the next Fetch (Result.Oldest); zero when none is.
	nextTime time.Time
}

// take takes from the buffer, in the client's order, up to max messages
// and up to the first position error. Past max it also takes the control
// records at the head, so that Lag and Committed count from the next
// offset that can hold data; the first data record beyond max stays for
// the next Fetch. It resumes the partition when the buffer fell below the
// reader's batch.
func (f *fetchState) take() {
	r, b := f.r, f.r.buf
	b.mu.Lock()
	defer b.mu.Unlock()
	b.limit = f.max
	if f.msgs == nil && b.records > 0 {
		f.msgs = make([]brokers.Message, 0, min(b.records, f.max))
	}
	i := 0
	for ; i < len(b.entries) && f.posErr == nil; i++ {
		e := &b.entries[i]
		if e.err != nil {
			if isPositionErr(e.err) {
				f.posErr = e.err
			} else if f.err == nil {
				f.err = e.err
			}
			continue
		}
		rec := e.rec
		if len(f.msgs) == f.max && !rec.Attrs.IsControl() && (r.next < 0 || rec.Offset >= r.next) {
			f.nextTime = rec.Timestamp
			break // a data record for the next Fetch
		}
		b.records--
		f.add(rec)
	}
	clear(b.entries[:i]) // the records belong to the messages now
	if i == len(b.entries) {
		b.entries = b.entries[:0]
	} else {
		b.entries = b.entries[i:]
	}
	if b.end >= 0 {
		r.end = b.end
	}
	b.resumeIfDrained()
}

// add takes one record: a message, or a control record to step past.
func (f *fetchState) add(rec *kgo.Record) {
	r := f.r
	if r.next >= 0 && rec.Offset < r.next {
		return // already returned
	}
	if rec.Attrs.IsControl() {
		r.next = rec.Offset + 1
		f.stepped = true
		return
	}
	if len(f.msgs) == cap(f.msgs) {
		f.msgs = append(f.msgs, brokers.Message{})[:len(f.msgs)]
	}
	f.msgs = f.msgs[:len(f.msgs)+1] // filled in place: no 160-byte copy per record
	fill(&f.msgs[len(f.msgs)-1], rec)
	f.offs = append(f.offs, rec.Offset)
	r.next = rec.Offset + 1
}

// isPositionErr reports a fetch error about the reader's position: out of
// range, data loss detected by the client, or a topic ID that is no longer
// the topic's.
func isPositionErr(err error) bool {
	var dataLoss *kgo.ErrDataLoss
	return errors.Is(err, kerr.OffsetOutOfRange) || errors.As(err, &dataLoss) ||
		errors.Is(err, kerr.UnknownTopicID) || errors.Is(err, kerr.InconsistentTopicID)
}

// decide turns a position error into the error Fetch returns and
// remembers it: a final one for every later Fetch, one that could not be
// decided yet to be decided again by the next Fetch (the client does not
// fetch on after an out of range answer, so it will not report it again).
func (r *Reader) decide(ctx context.Context, posErr error) error {
	err, again := r.positionError(ctx, posErr)
	r.undecided = nil
	switch {
	case again:
		r.undecided = posErr
	case !brokers.Retryable(err):
		r.failed = err
		// Nothing fetched after it is ever returned: keep none of it.
		for _, f := range r.buf.stop(true) {
			f()
		}
	}
	r.answered.Store(r.failed != nil || r.undecided != nil)
	return err
}

// positionError decides what a position error of a fetch means, from the
// partition's bounds and topic ID as they are now:
//   - below the log start: ErrPositionGone (retention or DeleteRecords
//     removed records the reader had not read);
//   - at or beyond the log end, or back within it (the log was truncated
//     and written again), or a data loss the client detected (the log was
//     truncated under the reader), or a topic ID that changed (the topic
//     was deleted and created again): ErrPositionUnknown.
//
// When the bounds cannot be listed, the listing's error is returned
// (usually retryable) with again set: the next Fetch decides again.
func (r *Reader) positionError(ctx context.Context, err error) (_ error, again bool) {
	const op = "fetch"
	var dataLoss *kgo.ErrDataLoss
	switch {
	case errors.As(err, &dataLoss):
		return &brokers.Error{Op: op, Err: fmt.Errorf("partition %d: the log was truncated under the reader at offset %d (the client was reset to %d): %w",
			r.partition, dataLoss.ConsumedTo, dataLoss.ResetTo, brokers.ErrPositionUnknown)}, false
	case errors.Is(err, kerr.UnknownTopicID), errors.Is(err, kerr.InconsistentTopicID):
		// The client keeps fetching and reports it again.
		if r.topicID == ([16]byte{}) {
			return translate(ctx, op, fmt.Errorf("partition %d: %w", r.partition, err)), false
		}
		_, now, merr := r.s.topicMeta(ctx, op)
		switch {
		case merr != nil:
			return merr, false
		case now != r.topicID:
			return &brokers.Error{Op: op, Err: fmt.Errorf("partition %d: topic %s was deleted and created again (topic id %x, now %x), so its offsets were reused: %w",
				r.partition, r.s.cfg.Topic, r.topicID, now, brokers.ErrPositionUnknown)}, false
		}
		return translate(ctx, op, fmt.Errorf("partition %d: %w", r.partition, err)), false
	}
	// Out of range: the client fetched where the records before the
	// error, all taken now, end.
	at := r.next
	if at < 0 {
		return &brokers.Error{Op: op, Err: fmt.Errorf("partition %d: the log start moved before the first fetch: %w: %s", r.partition, brokers.ErrPositionGone, err)}, false
	}
	lo, hi, berr := r.s.bounds(ctx, op, r.partition)
	if berr != nil {
		return berr, true
	}
	if at < lo {
		return &brokers.Error{Op: op, Err: fmt.Errorf("partition %d at offset %d, oldest held is %d: %w", r.partition, at, lo, brokers.ErrPositionGone)}, false
	}
	return &brokers.Error{Op: op, Err: fmt.Errorf("partition %d at offset %d out of range, the log ends at %d (truncated under the reader: topic deleted and created again, or an unclean leader election?): %w",
		r.partition, at, hi, brokers.ErrPositionUnknown)}, false
}

// nextAfter returns where the next fetch starts after the record at off,
// when off is the last record this reader returned; -1 otherwise.
func (r *Reader) nextAfter(off int64) int64 {
	r.hint.Lock()
	defer r.hint.Unlock()
	if off == r.lastData {
		return r.afterData
	}
	return -1
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

// Close stops the shared client fetching the reader's partition and
// drops what it buffered; the client itself stays for the stream's other
// readers. Closing twice is harmless.
func (r *Reader) Close() error {
	lifetime.Leave(&r.s.mu, r.s.readers, r)
	if r.close(true) {
		r.s.retire(r.c)
	}
	return nil
}

// close ends the reader: a Fetch in flight returns ErrClosed, and a Wake
// arrangement is called. With remove the partition is removed from the
// shared client (Stream.Close closes the client instead). It reports
// whether this call closed it.
func (r *Reader) close(remove bool) (closed bool) {
	r.closeOnce.Do(func() {
		closed = true
		r.closed.Store(true)
		close(r.done)
		for _, f := range r.buf.stop(remove) {
			f()
		}
		if remove {
			r.c.remove(r.buf)
		}
	})
	return closed
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}
