package memory

// Receiver: one consumer of a Queue, and how messages are taken, settled and
// given back.

import (
	"context"
	"fmt"
	"time"

	"github.com/drover-dev/drover/brokers"
)

// Receiver is one consumer of a Queue. It implements brokers.Receiver and
// brokers.Extender.
type Receiver struct {
	q     *Queue
	slot  string
	owner *QueueClient // nil when opened on the Queue itself
	// closed is guarded by q.mu.
	closed bool
	// busyUntil is when the call in progress ends on the queue's clock (a
	// Receive that waits is busy until its wait ends, a delayed call until
	// its delay ends).
	// Guarded by q.mu.
	busyUntil time.Time
}

// enterCall records the start of a call on r and counts it as a misuse
// when an earlier call is still in progress: a Receiver is used by one
// goroutine at a time (brokers.Receiver). Under the testkit's executor a
// job runs at one instant and a waiting Receive stays in progress until its
// wait is over, so this sees two jobs of one unit that overlap in virtual
// time. The caller holds q.mu.
func (r *Receiver) enterCallLocked(op string) {
	now := r.q.clock.Now()
	if now.Before(r.busyUntil) {
		r.q.misuses = append(r.q.misuses, fmt.Sprintf("%s on slot %s at %s while a call runs until %s",
			op, r.slot, now.Format(time.RFC3339Nano), r.busyUntil.Format(time.RFC3339Nano)))
	}
	r.busyUntil = now
}

var (
	_ brokers.Receiver = (*Receiver)(nil)
	_ brokers.Extender = (*Receiver)(nil)
)

// Receive returns up to max deliverable messages, oldest first, each in
// flight until now+AckDeadline. When none is deliverable it waits up to wait
// (returning early when messages are sent or given back, or when a delayed
// or expired one becomes deliverable), then looks once more.
func (r *Receiver) Receive(ctx context.Context, max int, wait time.Duration) (brokers.Result, error) {
	if max <= 0 {
		return brokers.Result{}, &brokers.Error{Op: OpReceive, Err: fmt.Errorf("max %d must be positive", max)}
	}
	q := r.q
	if _, err := q.enter(ctx, OpReceive, r); err != nil {
		return brokers.Result{}, err
	}
	q.mu.Lock()
	if err := q.checkLocked(OpReceive, r); err != nil {
		q.mu.Unlock()
		return brokers.Result{}, err
	}
	r.enterCallLocked(OpReceive)
	res, next := r.takeLocked(max)
	wake := q.wake
	start := q.clock.Now()
	if len(res.Messages) == 0 && wait > 0 {
		d := wait
		if next > 0 && next < d {
			d = next
		}
		r.busyUntil = start.Add(d) // what the wait below takes under the testkit
	}
	q.mu.Unlock()
	if len(res.Messages) > 0 || wait <= 0 {
		return res, nil
	}
	defer func() {
		// On a clock that moved while we waited the call is over now (a
		// wake may end the wait early); under the testkit time stands
		// still during a job and the wait ends when its result arrives.
		q.mu.Lock()
		if now := q.clock.Now(); now.After(start) {
			r.busyUntil = now
		}
		q.mu.Unlock()
	}()

	if q.testHookWait != nil {
		q.testHookWait()
	}
	w := newWaiter(q.clock, wait)
	for {
		again, err := w.wait(ctx, wake, next)
		if err != nil {
			return brokers.Result{}, err
		}
		q.mu.Lock()
		if err := q.closedLocked(OpReceive, r); err != nil {
			q.mu.Unlock()
			return brokers.Result{}, err
		}
		res, next = r.takeLocked(max)
		wake = q.wake
		q.mu.Unlock()
		if len(res.Messages) > 0 || !again {
			return res, nil
		}
	}
}

// takeLocked delivers up to max messages to r. When it finds none, next is
// how long until the first in-flight or delayed message becomes deliverable
// (0 when none will without a Send).
func (r *Receiver) takeLocked(max int) (res brokers.Result, next time.Duration) {
	q := r.q
	now := q.clock.Now()
	var soonest time.Time
	for _, qm := range q.msgs {
		if len(res.Messages) == max {
			break
		}
		if qm.acked {
			continue
		}
		var until time.Time
		switch {
		case qm.holder != nil && now.Before(qm.deadline):
			until = qm.deadline
		case qm.holder == nil && now.Before(qm.visibleAt):
			until = qm.visibleAt
		}
		if !until.IsZero() {
			if soonest.IsZero() || until.Before(soonest) {
				soonest = until
			}
			continue
		}
		if qm.holder != nil {
			// delivered again because its deadline passed in flight
			q.expiries = append(q.expiries, Expiry{ID: qm.msg.ID, Slot: qm.holder.slot, At: qm.deadline})
		}
		qm.deliveries++
		qm.holder = r
		qm.deadline = now.Add(q.deadline)
		m := copyMessage(qm.msg)
		m.Deliveries = qm.deliveries
		m.Handle = handle{q: q, id: qm.msg.ID, delivery: qm.deliveries}
		res.Messages = append(res.Messages, m)
	}
	n, oldest := q.waitingLocked(now)
	res.Lag, res.Oldest = int64(n), oldest
	if len(res.Messages) == 0 && !soonest.IsZero() {
		next = soonest.Sub(now)
	}
	return res, next
}

// currentLocked returns the message m's handle names when that handle is
// its latest delivery and it is not acked yet; nil otherwise. It fails for
// a message that did not come from this queue.
func (q *Queue) currentLocked(op string, m brokers.Message) (*queued, error) {
	h, ok := m.Handle.(handle)
	if !ok || h.q != q {
		return nil, &brokers.Error{Op: op, Err: fmt.Errorf("message %q was not received from this queue", m.ID)}
	}
	qm := q.byID[h.id]
	if qm == nil || qm.acked || qm.deliveries != h.delivery {
		return nil, nil
	}
	return qm, nil
}

// settle runs an Ack, Nack or Extend: it waits op's injected delay, fails
// on a closed receiver, an injected failure or a message that did not come
// from this queue, and otherwise calls apply, under the queue's lock, with
// the messages of msgs whose handle is still their latest delivery.
func (r *Receiver) settle(ctx context.Context, op string, msgs []brokers.Message, apply func(targets []*queued)) error {
	q := r.q
	entered, err := q.enter(ctx, op, r)
	if err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.checkLocked(op, r); err != nil {
		return err
	}
	if !entered {
		r.enterCallLocked(op)
	}
	var targets []*queued
	for _, m := range msgs {
		qm, err := q.currentLocked(op, m)
		if err != nil {
			return err
		}
		if qm != nil {
			targets = append(targets, qm)
		}
	}
	apply(targets)
	return nil
}

// Ack removes msgs for good. Messages delivered again since (their deadline
// passed) or already acked are left alone.
func (r *Receiver) Ack(ctx context.Context, msgs []brokers.Message) error {
	q := r.q
	return r.settle(ctx, OpAck, msgs, func(targets []*queued) {
		if q.dropAcks > 0 {
			q.dropAcks--
			return
		}
		for _, qm := range targets {
			if qm.acked { // the same message twice in msgs
				continue
			}
			qm.acked = true
			qm.holder = nil
			delete(q.byID, qm.msg.ID)
			q.live--
			q.acked++
		}
		q.compactLocked()
	})
}

// compactLocked drops acked entries once they are the majority.
func (q *Queue) compactLocked() {
	if len(q.msgs) < 64 || q.live*2 > len(q.msgs) {
		return
	}
	kept := make([]*queued, 0, q.live)
	for _, qm := range q.msgs {
		if !qm.acked {
			kept = append(kept, qm)
		}
	}
	q.msgs = kept
}

// Nack gives msgs back, deliverable again after delay.
func (r *Receiver) Nack(ctx context.Context, msgs []brokers.Message, delay time.Duration) error {
	q := r.q
	return r.settle(ctx, OpNack, msgs, func(targets []*queued) {
		now := q.clock.Now()
		for _, qm := range targets {
			qm.holder = nil
			qm.visibleAt = now.Add(max(delay, 0))
		}
		if len(targets) > 0 {
			q.notifyLocked()
		}
	})
}

// Extend moves the ack deadline of msgs to d from now, keeping them
// invisible to other receivers however often it is called in time. A
// delivery whose deadline has already passed is no longer in flight and is
// left alone (SQS answers MessageNotInflight): the message is deliverable
// again, so an extension that comes too late cannot hide a redelivery.
// Messages delivered again since, nacked, or acked are left alone too.
func (r *Receiver) Extend(ctx context.Context, msgs []brokers.Message, d time.Duration) error {
	q := r.q
	return r.settle(ctx, OpExtend, msgs, func(targets []*queued) {
		now := q.clock.Now()
		for _, qm := range targets {
			// holder is nil when a nack gave the message back.
			if qm.holder != nil && now.Before(qm.deadline) {
				qm.deadline = now.Add(max(d, 0))
			}
		}
	})
}

// Close releases the receiver. Its unacknowledged messages stay in flight
// until their deadline, as on a real broker. Closing twice is harmless.
func (r *Receiver) Close() error {
	r.q.mu.Lock()
	defer r.q.mu.Unlock()
	r.closed = true
	r.q.notifyLocked()
	return nil
}
