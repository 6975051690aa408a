package memory

// Reader: one partition of a Stream, read as Kafka's read_committed does.

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/internal/mutate"
)

// Reader reads one partition of a Stream. It implements brokers.Reader.
type Reader struct {
	s     *Stream
	p     *partition
	owner *StreamClient // nil when opened on the Stream itself
	// Guarded by s.mu.
	next int64 // offset of the next message to return
	sub  int   // in the aggregate at next: the index of the next user record to return
	// checkSub: opened after a sub-position, not yet found in the record
	// at next (readLocked refuses one that record does not have).
	checkSub bool
	closed   bool
}

var (
	_ brokers.Reader = (*Reader)(nil)
	_ brokers.Waker  = (*Reader)(nil)
)

// Fetch returns up to max messages after the reader's position, as Kafka's
// read_committed does: never at or past the last stable offset, never a
// record of an aborted transaction or a control marker (the position steps
// over them). Lag counts the offsets from the position to the last stable
// offset. When there is nothing to return it waits up to wait for messages
// to become readable (returning early when they do), then looks once more.
// On a closed partition the batch that returns the last message, or any
// later fetch, has End set. A reader of a partition of a recreated stream
// fails with brokers.ErrPositionUnknown (Stream.Recreate).
func (r *Reader) Fetch(ctx context.Context, max int, wait time.Duration) (brokers.Result, error) {
	if max <= 0 {
		return brokers.Result{}, &brokers.Error{Op: OpFetch, Err: fmt.Errorf("max %d must be positive", max)}
	}
	s := r.s
	if err := ctx.Err(); err != nil {
		return brokers.Result{}, err
	}
	s.mu.Lock()
	if err := r.checkLocked(); err != nil {
		s.mu.Unlock()
		return brokers.Result{}, err
	}
	d := s.faults.delay(OpFetch)
	s.mu.Unlock()
	if err := pause(ctx, d); err != nil {
		return brokers.Result{}, err
	}

	s.mu.Lock()
	err := r.checkLocked()
	if err == nil {
		err = s.faults.take(OpFetch)
	}
	if err != nil {
		s.mu.Unlock()
		return brokers.Result{}, err
	}
	res, err := r.readLocked(max)
	if err != nil || len(res.Messages) > 0 || res.End || wait <= 0 {
		s.mu.Unlock()
		return res, err
	}
	wake := r.p.waitChan()
	s.mu.Unlock()

	if s.testHookWait != nil {
		s.testHookWait()
	}
	w := newWaiter(s.clock, wait)
	for {
		again, err := w.wait(ctx, wake, 0)
		if err != nil {
			return brokers.Result{}, err
		}
		s.mu.Lock()
		if err := r.checkLocked(); err != nil {
			s.mu.Unlock()
			return brokers.Result{}, err
		}
		res, err = r.readLocked(max)
		wake = r.p.waitChan()
		s.mu.Unlock()
		if err != nil || len(res.Messages) > 0 || res.End || !again {
			return res, err
		}
	}
}

func (r *Reader) checkLocked() error {
	if r.closed || r.s.closed || (r.owner != nil && r.owner.closed) {
		return &brokers.Error{Op: OpFetch, Err: brokers.ErrClosed}
	}
	return nil
}

func (r *Reader) readLocked(max int) (brokers.Result, error) {
	p := r.p
	if p.gone {
		if _, ok := r.s.lookupLocked(p.id); !ok {
			return brokers.Result{}, &brokers.Error{Op: OpFetch, Err: fmt.Errorf("partition %q: the stream was recreated without it: %w", p.id, brokers.ErrUnknownPartition)}
		}
		return brokers.Result{}, &brokers.Error{Op: OpFetch, Err: fmt.Errorf("partition %s at %d: the stream was recreated: %w", p.id, r.next, brokers.ErrPositionUnknown)}
	}
	if r.next < p.base {
		what := "oldest held is " + strconv.FormatInt(p.base, 10)
		if p.forgotten {
			what = "the partition aged out"
		}
		return brokers.Result{}, &brokers.Error{Op: OpFetch, Err: fmt.Errorf("partition %s at %d (%s): %w", p.id, r.next, what, brokers.ErrPositionGone)}
	}
	end := p.end()
	if r.next > end {
		return brokers.Result{}, &brokers.Error{Op: OpFetch, Err: fmt.Errorf("partition %s at %d (its end is %d): %w", p.id, r.next, end, brokers.ErrPositionUnknown)}
	}
	lso := p.lso()
	if mutate.On(mutate.ReadUncommitted) {
		lso = end // the bug of issue 9 item 5: transactions read uncommitted
	}
	if r.checkSub && r.next < lso {
		rec := &p.recs[r.next-p.base]
		switch {
		case rec.subs == nil:
			return brokers.Result{}, r.noSub(p, "the record is not an aggregate")
		case r.sub > len(rec.subs):
			return brokers.Result{}, r.noSub(p, fmt.Sprintf("its aggregate holds %d user records", len(rec.subs)))
		}
		r.checkSub = false
	}
	var msgs []brokers.Message
	for ; r.next < lso; r.next++ {
		rec := &p.recs[r.next-p.base]
		if !rec.visible() && !(mutate.On(mutate.ReadUncommitted) && !rec.marker) {
			continue // aborted or a marker: stepped over, never returned
		}
		if len(msgs) == max {
			break
		}
		if rec.subs == nil {
			msgs = append(msgs, copyMessage(rec.msg))
			continue
		}
		for ; r.sub < len(rec.subs) && len(msgs) < max; r.sub++ {
			msgs = append(msgs, copyMessage(rec.subs[r.sub]))
		}
		if r.sub < len(rec.subs) {
			break // max reached inside the aggregate: the rest is next
		}
		r.sub = 0
	}
	res := brokers.Result{
		Messages: msgs,
		End:      p.closed && r.next >= end,
		Lag:      max64(lso-r.next, 0),
	}
	if r.next < lso && r.sub > 0 { // the aggregate begun counts its user records left
		res.Lag += int64(len(p.recs[r.next-p.base].subs) - r.sub - 1)
	}
	for o := r.next; o < lso; o++ { // the next readable message's time
		if rec := &p.recs[o-p.base]; rec.visible() {
			res.Oldest = rec.msg.Time
			break
		}
	}
	return res, nil
}

// noSub is brokers.ErrPositionUnknown for a reader opened after a
// sub-position that the record at r.next does not have (a plain record,
// or an index past its aggregate's end): reading on would skip the record
// (brokers.ComparePositions puts it after each of its sub-positions) or
// the rest of the aggregate with no word said.
func (r *Reader) noSub(p *partition, why string) error {
	return &brokers.Error{Op: OpFetch, Err: fmt.Errorf("partition %s: the position %s is not a user record of offset %d (%s): %w",
		p.id, brokers.SubPosition(strconv.FormatInt(r.next, 10), r.sub-1), r.next, why, brokers.ErrPositionUnknown)}
}

// Close releases the reader. Closing twice is harmless.
func (r *Reader) Close() error {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	r.closed = true
	if r.owner != nil {
		delete(r.owner.readers, r)
	}
	r.p.notify()
	return nil
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// wakeup is one Wake arrangement: f, called at most once.
type wakeup struct {
	f    func()
	done bool
}

func (w *wakeup) fire() {
	if !w.done {
		w.done = true
		w.f()
	}
}

// Wake implements brokers.Waker: f is called once, as soon as a Fetch may
// find something new — messages, the end of a closed partition, an error
// (the reader, its client or the stream closed, the stream recreated) —
// and at once, before Wake returns, when it already may. It runs on the
// goroutine that changed the partition, with the stream's lock held: f
// must not call the stream (the unit actor's only sends itself a message).
// cancel forgets the arrangement; f is not called after cancel returned.
func (r *Reader) Wake(f func()) (cancel func()) {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	w := &wakeup{f: f}
	if r.readableLocked() {
		w.fire()
		return func() {}
	}
	p := r.p
	p.wakers = append(p.wakers, w)
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		w.done = true
		p.wakers = slices.DeleteFunc(p.wakers, func(o *wakeup) bool { return o == w })
	}
}

// readableLocked reports whether a Fetch may return at once with
// something: messages below the last stable offset (perhaps only aborted
// ones or markers, which makes the call spurious), the end of a closed
// partition, or an error.
func (r *Reader) readableLocked() bool {
	p := r.p
	return r.checkLocked() != nil || p.gone || p.closed || r.next < p.base || r.next > p.end() || r.next < p.lso()
}
