package kafka

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// entry is one thing the client fetched for a partition, in its order: a
// record (data or control) or an error.
type entry struct {
	rec *kgo.Record
	err error
}

// partBuf holds what the shared client fetched for one reader's partition
// until the reader's Fetch takes it. It is bounded: when it holds at least
// limit records (the reader's batch size) the partition is paused in the
// client, whose own buffer then drops what it fetches of it, to fetch it
// again from the same offset; the reader resumes it once Fetch has taken
// it below limit. So a reader that is not fetched holds at most about one
// batch plus one fetch response of its partition.
type partBuf struct {
	c      *consumer
	p      int32
	notify chan struct{} // capacity 1: something was pushed into an empty buffer

	mu      sync.Mutex
	entries []entry
	records int   // records (data and control) in entries
	end     int64 // LSO (HWM when read_uncommitted) of the latest fetch; -1 until known
	limit   int   // pause at this many records
	paused  bool  // paused in the client by this buffer
	stopped bool  // the reader failed for good or closed: nothing is kept
	wakes   map[uint64]func()
	wakeID  uint64

	// For tests: the most records ever held, and pauses made.
	peak, pauses int
}

// push appends one partition's records and error from a fetch (end < 0:
// unknown), pausing the partition when the buffer reaches its limit, and
// returns wakes with the wake-ups now due. A run of errors with no record
// between them keeps one: the first position error, else the latest, so
// that a partition whose reader does not fetch cannot pile up errors the
// client reports again and again. Called by the poll loop with c.mu held.
func (b *partBuf) push(recs []*kgo.Record, err error, end int64, wakes []func()) []func() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return wakes
	}
	if end >= 0 {
		b.end = end
	}
	was := len(b.entries)
	for _, rec := range recs {
		b.entries = append(b.entries, entry{rec: rec})
	}
	b.records += len(recs)
	if err != nil {
		n := len(b.entries)
		switch {
		case n > 0 && b.entries[n-1].err != nil && isPositionErr(b.entries[n-1].err):
			// keep the position error: it decides the reader's fate
		case n > 0 && b.entries[n-1].err != nil:
			b.entries[n-1].err = err
		default:
			b.entries = append(b.entries, entry{err: err})
		}
	}
	b.peak = max(b.peak, b.records)
	if !b.paused && b.records >= b.limit {
		b.paused = true
		b.pauses++
		b.c.cl.PauseFetchPartitions(map[string][]int32{b.c.s.cfg.Topic: {b.p}})
	}
	if was == 0 && len(b.entries) > 0 {
		select {
		case b.notify <- struct{}{}:
		default:
		}
		wakes = b.takeWakes(wakes)
	}
	return wakes
}

// takeWakes moves the pending wake-ups to wakes. Called with the lock held.
func (b *partBuf) takeWakes(wakes []func()) []func() {
	for id, f := range b.wakes {
		wakes = append(wakes, f)
		delete(b.wakes, id)
	}
	return wakes
}

// resumeIfDrained resumes the partition when the buffer holds fewer records
// than its limit again. Called with the lock held.
func (b *partBuf) resumeIfDrained() {
	if b.paused && !b.stopped && b.records < b.limit {
		b.paused = false
		b.c.cl.ResumeFetchPartitions(map[string][]int32{b.c.s.cfg.Topic: {b.p}})
	}
}

// stop drops everything held and keeps nothing more: the reader failed for
// good or closed. With pause the partition stays paused in the client until
// it is removed, so that nothing more of it is fetched (a closing client
// needs no pause). It returns the wake-ups due.
func (b *partBuf) stop(pause bool) []func() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return nil
	}
	b.stopped = true
	b.entries, b.records = nil, 0
	if pause && !b.paused {
		b.paused = true
		b.c.cl.PauseFetchPartitions(map[string][]int32{b.c.s.cfg.Topic: {b.p}})
	}
	return b.takeWakes(nil)
}

// wake arranges for f to be called when something is pushed into the
// buffer, or at once (before it returns) when it already holds something or
// has stopped; ready says the reader has an answer without fetching.
func (b *partBuf) wake(f func(), ready bool) (cancel func()) {
	b.mu.Lock()
	if ready || b.stopped || len(b.entries) > 0 {
		b.mu.Unlock()
		f()
		return func() {}
	}
	if b.wakes == nil {
		b.wakes = make(map[uint64]func())
	}
	b.wakeID++
	id := b.wakeID
	b.wakes[id] = f
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		delete(b.wakes, id)
		b.mu.Unlock()
	}
}
