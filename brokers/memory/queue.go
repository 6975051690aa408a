package memory

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/internal/clock"
	"github.com/drover-dev/drover/internal/mutate"
)

// DefaultAckDeadline is the ack deadline of a QueueConfig that sets none.
const DefaultAckDeadline = 30 * time.Second

// QueueConfig configures a Queue. The zero value is a queue with a 30 s ack
// deadline on the wall clock.
type QueueConfig struct {
	// AckDeadline is how long a received message stays in flight before it
	// is delivered again. 0 means DefaultAckDeadline.
	AckDeadline time.Duration
	// Clock judges ack deadlines and nack delays and stamps messages that
	// have no Time. nil means clock.Real{}.
	Clock clock.Clock
}

// Validate reports a config that cannot be used.
func (c QueueConfig) Validate() error {
	if c.AckDeadline < 0 {
		return fmt.Errorf("memory queue: ack deadline: %v is negative", c.AckDeadline)
	}
	return nil
}

func (c QueueConfig) withDefaults() QueueConfig {
	if c.AckDeadline == 0 {
		c.AckDeadline = DefaultAckDeadline
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	return c
}

// Queue is an in-memory queue with competing receivers. It implements
// brokers.Queue and is safe for concurrent use.
type Queue struct {
	clock    clock.Clock
	deadline time.Duration

	// testHookWait, when set, is called before a Receive starts waiting.
	testHookWait func()

	mu       sync.Mutex
	seq      int
	misuses  []string  // calls on a receiver while another was in progress
	expiries []Expiry  // deliveries whose deadline passed in flight
	msgs     []*queued // not yet acked, in Send order (acked ones removed lazily)
	live     int       // entries of msgs not acked
	byID     map[string]*queued
	acked    int
	faults   faults
	dropAcks int
	closed   bool
	// wake is closed and replaced when a waiting receiver may find
	// something new (Send, Nack, Close).
	wake chan struct{}
}

var _ brokers.Queue = (*Queue)(nil)

// queued is one message not yet acknowledged.
type queued struct {
	msg        brokers.Message // ID, Position and Time set; no Handle
	acked      bool
	deliveries int       // deliveries so far; the current delivery's number
	holder     *Receiver // receiver of the current delivery; nil when given back
	deadline   time.Time // the holder's ack deadline
	visibleAt  time.Time // when a nacked message may be delivered again
}

// handle is a delivered message's brokers.Message.Handle: it names one
// delivery of one message of one queue.
type handle struct {
	q        *Queue
	id       string
	delivery int
}

// NewQueue returns an empty queue.
func NewQueue(cfg QueueConfig) (*Queue, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	return &Queue{
		clock:    cfg.Clock,
		deadline: cfg.AckDeadline,
		byID:     make(map[string]*queued),
		wake:     make(chan struct{}),
	}, nil
}

// Send enqueues msgs and returns their ids ("m-1", "m-2", ...), which are
// also their Positions. Ids are the queue's own and never reused, not even
// across Recreate, as SQS and Pub/Sub ids are unique to the broker. A zero Time is set to the clock's now. The slices are
// copied. Sending to a closed queue drops the messages and returns nil.
func (q *Queue) Send(msgs ...brokers.Message) []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || len(msgs) == 0 {
		return nil
	}
	now := q.clock.Now()
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		q.seq++
		m = copyMessage(m)
		m.ID = "m-" + strconv.Itoa(q.seq)
		m.Position = m.ID
		m.Deliveries = 0
		m.Handle = nil
		if m.Time.IsZero() {
			m.Time = now
		}
		qm := &queued{msg: m}
		q.msgs = append(q.msgs, qm)
		q.byID[m.ID] = qm
		ids[i] = m.ID
	}
	q.live += len(msgs)
	q.notifyLocked()
	return ids
}

func (q *Queue) notifyLocked() {
	close(q.wake)
	q.wake = make(chan struct{})
}

// Pending counts messages that are neither acked nor in flight: ready to be
// delivered, or delayed by a nack.
func (q *Queue) Pending() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.live - q.inFlightLocked(q.clock.Now())
}

// InFlight counts messages delivered whose ack deadline has not passed.
func (q *Queue) InFlight() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.inFlightLocked(q.clock.Now())
}

// Acked counts messages removed by an ack (dropped acks do not count).
func (q *Queue) Acked() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.acked
}

func (q *Queue) inFlightLocked(now time.Time) int {
	n := 0
	for _, qm := range q.msgs {
		if !qm.acked && qm.holder != nil && now.Before(qm.deadline) {
			n++
		}
	}
	return n
}

// FailNext makes the next n calls of op fail with err; nil err means a
// retryable *brokers.Error wrapping brokers.ErrInjected. op is one of the
// Op* constants; it panics on another name (a mistake in a test).
func (q *Queue) FailNext(op string, n int, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.faults.failNext(op, n, err)
}

// Delay makes every later call of op wait d (through exec.Pause) before it
// runs; d <= 0 removes the delay.
func (q *Queue) Delay(op string, d time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.faults.setDelay(op, d)
}

// DropAcks makes the next n Ack calls report success and do nothing, so
// their messages come back after the ack deadline.
func (q *Queue) DropAcks(n int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.dropAcks += max(n, 0)
}

// ClearFaults removes every pending FailNext, Delay and DropAcks.
func (q *Queue) ClearFaults() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.faults.clear()
	q.dropAcks = 0
}

// Open returns a receiver for slot. Any number of receivers may be open,
// on the same slot or different ones; they compete for the messages.
func (q *Queue) Open(ctx context.Context, slot string) (brokers.Receiver, error) {
	r, err := q.OpenReceiver(ctx, slot)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// OpenReceiver is Open returning the concrete type.
func (q *Queue) OpenReceiver(ctx context.Context, slot string) (*Receiver, error) {
	return q.openReceiver(ctx, nil, slot)
}

func (q *Queue) openReceiver(ctx context.Context, owner *QueueClient, slot string) (*Receiver, error) {
	if _, err := q.enter(ctx, OpOpen, nil); err != nil {
		return nil, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if owner != nil && owner.closed {
		return nil, &brokers.Error{Op: OpOpen, Err: brokers.ErrClosed}
	}
	if err := q.checkLocked(OpOpen, nil); err != nil {
		return nil, err
	}
	return &Receiver{q: q, slot: slot, owner: owner}, nil
}

// Recreate deletes the queue and creates it again, as an operator
// deleting an SQS queue or a Pub/Sub subscription and creating one of the
// same name does: every message, acked or not, in flight or not, is gone.
// Receivers opened before go on receiving from the new queue (a queue URL
// or subscription name stays valid); acks, nacks and extensions of messages
// received before are ignored, as for any delivery that is no longer
// current. Ids go on from where they were: the queue never reuses one.
// Injected faults stay.
func (q *Queue) Recreate() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return &brokers.Error{Op: "recreate", Err: brokers.ErrClosed}
	}
	q.msgs = nil
	q.byID = make(map[string]*queued)
	q.live = 0
	if mutate.On(mutate.ReusedQueueIDs) {
		q.seq = 0 // the bug of issue 9 item 4: ids of a new incarnation collide
	}
	q.notifyLocked()
	return nil
}

// Close closes the queue and every receiver (a receiver is closed when
// it, its client or its queue is); waiting receives return
// brokers.ErrClosed. Closing twice is harmless.
func (q *Queue) Close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil
	}
	q.closed = true
	q.notifyLocked()
	return nil
}

// enter checks that the call may start and runs op's injected delay. It
// reports whether it entered the call on r already (a settling call with
// a delay: see enterCallLocked).
func (q *Queue) enter(ctx context.Context, op string, r *Receiver) (entered bool, err error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	q.mu.Lock()
	if err := q.closedLocked(op, r); err != nil {
		q.mu.Unlock()
		return false, err
	}
	d := q.faults.delay(op)
	if r != nil && d > 0 && op != OpReceive {
		// the call is in progress for its delay: under the testkit the
		// delay is the job's result coming d later
		r.enterCallLocked(op)
		r.busyUntil = q.clock.Now().Add(d)
		entered = true
	}
	q.mu.Unlock()
	if err := pause(ctx, d); err != nil {
		if entered {
			// cancelled: the call ends now, not at the end of its delay
			q.mu.Lock()
			r.busyUntil = q.clock.Now()
			q.mu.Unlock()
		}
		return entered, err
	}
	return entered, nil
}

func (q *Queue) closedLocked(op string, r *Receiver) error {
	if q.closed || (r != nil && (r.closed || (r.owner != nil && r.owner.closed))) {
		return &brokers.Error{Op: op, Err: brokers.ErrClosed}
	}
	return nil
}

// checkLocked fails a call on a closed queue or receiver, or with an
// injected failure.
func (q *Queue) checkLocked(op string, r *Receiver) error {
	if err := q.closedLocked(op, r); err != nil {
		return err
	}
	return q.faults.take(op)
}

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

// Expiry is a delivery whose ack deadline passed while it was in flight:
// the message was delivered again (to any receiver) after At.
type Expiry struct {
	ID   string
	Slot string // the slot of the receiver that held it
	At   time.Time
}

// Expiries lists the deliveries whose deadline passed in flight, in the
// order they were noticed (when the message was delivered again).
func (q *Queue) Expiries() []Expiry {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]Expiry(nil), q.expiries...)
}

// Misuses lists the calls made on a receiver while another call on it was
// in progress (see brokers.Receiver: one goroutine at a time).
func (q *Queue) Misuses() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]string(nil), q.misuses...)
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
	res.Lag = int64(q.live - q.inFlightLocked(now))
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

// QueueClient is one client's view of a Queue, as a node connected to a
// real broker would have: Close releases only the receivers opened through
// it (their messages stay in flight until their deadline), and the queue
// goes on for everyone else. It implements brokers.Queue.
type QueueClient struct {
	q      *Queue
	closed bool // guarded by q.mu
}

var _ brokers.Queue = (*QueueClient)(nil)

// NewClient returns a new client of q.
func (q *Queue) NewClient() *QueueClient {
	return &QueueClient{q: q}
}

// Open is Queue.Open; the receiver is closed with the client.
func (c *QueueClient) Open(ctx context.Context, slot string) (brokers.Receiver, error) {
	r, err := c.q.openReceiver(ctx, c, slot)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// Close closes the client and its receivers; waiting receives return
// brokers.ErrClosed. Closing twice is harmless.
func (c *QueueClient) Close() error {
	c.q.mu.Lock()
	defer c.q.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	c.q.notifyLocked()
	return nil
}
