package memory

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/internal/open"
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
	c.AckDeadline = cmp.Or(c.AckDeadline, DefaultAckDeadline)
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

// waitingLocked counts the messages neither acked nor in flight at now
// (delayed ones included: they wait for any slot) and returns the oldest
// Time among them, zero when there is none.
func (q *Queue) waitingLocked(now time.Time) (n int, oldest time.Time) {
	for _, qm := range q.msgs {
		if qm.acked || (qm.holder != nil && now.Before(qm.deadline)) {
			continue
		}
		n++
		if t := qm.msg.Time; oldest.IsZero() || t.Before(oldest) {
			oldest = t
		}
	}
	return n, oldest
}

// Open returns a receiver for slot. Any number of receivers may be open,
// on the same slot or different ones; they compete for the messages.
func (q *Queue) Open(ctx context.Context, slot string) (brokers.Receiver, error) {
	return open.Receiver(q.OpenReceiver(ctx, slot))
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
