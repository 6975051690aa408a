package nats

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/internal/lifetime"
	"github.com/drover-dev/drover/brokers/internal/open"
)

// queueProbe is how long the server keeps a queue's request for the
// messages that are there now. A full batch returns at once; a partial one
// after queueProbe; one at MaxAckPending, empty, after queueProbe.
const queueProbe = 5 * time.Millisecond

// Queue is a JetStream durable pull consumer read by competing receivers.
// It implements brokers.Queue and is safe for concurrent use.
type Queue struct {
	c    *conn
	cfg  QueueConfig
	conv converter

	// inc names the lives of the stream the messages come from (message
	// IDs); checkMu makes concurrent receivers share one stream info.
	inc     incarnations
	checkMu sync.Mutex

	// stale is set when a pull found no consumer (the stream or the
	// consumer was deleted): the next receive binds again. bindMu
	// serializes that; consMu guards cons and boundTo.
	stale   atomic.Bool
	bindMu  sync.Mutex
	consMu  sync.Mutex
	cons    jetstream.Consumer
	boundTo int64 // the stream life (created, Unix ns) cons was bound in

	mu        sync.Mutex
	closed    bool
	receivers map[*Receiver]struct{}
}

var _ brokers.Queue = (*Queue)(nil)

// NewQueue connects to NATS and binds to the durable consumer cfg.Durable
// on cfg.Stream, creating it when it does not exist (unless BindOnly) and
// updating its AckWait, MaxAckPending and FilterSubjects when they differ
// from cfg. The stream must exist.
func NewQueue(ctx context.Context, cfg QueueConfig) (*Queue, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	c, err := dial(ctx, cfg.Conn)
	if err != nil {
		return nil, err
	}
	q := &Queue{c: c, cfg: cfg, receivers: make(map[*Receiver]struct{})}
	q.conv = func(m jetstream.Msg) converted { return convert(m, q.cfg.Key, true) }
	// The stream's current life first: the IDs of what the consumer
	// delivers name it.
	if err := q.checkStream(ctx, "bind consumer"); err != nil {
		c.close()
		return nil, err
	}
	cons, err := bindConsumer(ctx, c, cfg)
	if err != nil {
		c.close()
		return nil, err
	}
	q.setConsumer(cons)
	return q, nil
}

// consumer is the durable consumer the receivers pull from.
func (q *Queue) consumer() jetstream.Consumer {
	q.consMu.Lock()
	defer q.consMu.Unlock()
	return q.cons
}

func (q *Queue) setConsumer(cons jetstream.Consumer) {
	q.consMu.Lock()
	defer q.consMu.Unlock()
	q.cons, q.boundTo = cons, q.inc.newest().created
}

// checkStream reads the stream info and records the stream's current life
// (see incarnations), logging when the stream turns out to have been
// created again. A missing stream is a non-retryable *brokers.Error that
// wraps errStreamGone.
func (q *Queue) checkStream(ctx context.Context, op string) error {
	if err := q.c.ready(op); err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, q.cfg.Conn.RequestTimeout)
	defer cancel()
	st, err := q.c.js.Stream(rctx, q.cfg.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return &brokers.Error{Op: op, Err: fmt.Errorf("stream %q %w", q.cfg.Stream, errStreamGone)}
	}
	if err != nil {
		return translate(op, fmt.Errorf("stream %q: %w", q.cfg.Stream, err))
	}
	info := st.CachedInfo()
	if prev, recreated := q.inc.observe(info); recreated {
		q.cfg.Conn.Logger.Warn("nats: the queue's stream was deleted and created again; its messages get new ids",
			"stream", q.cfg.Stream, "created_before", prev.createdTime(), "created_now", info.Created.UTC())
	}
	return nil
}

// errStreamGone: the queue's stream does not exist (any more).
var errStreamGone = errors.New("not found")

// cover makes sure the stream lives of messages stamped up to stamp are
// known, reading the stream info when they may not be. A stream deleted
// since the messages were stored is no reason to fail: they belong to a
// life already known.
func (q *Queue) cover(ctx context.Context, op string, stamp int64) error {
	q.checkMu.Lock()
	defer q.checkMu.Unlock()
	if q.inc.covers(stamp) {
		return nil
	}
	err := q.checkStream(ctx, op)
	if errors.Is(err, errStreamGone) {
		q.stale.Store(true)
		return nil
	}
	return err
}

// name sets a message's ID and Position: "<stream>:<created>:<sequence>",
// where created is the creation time (Unix ns) of the stream life that
// stored it, so that a stream deleted and created again, whose sequences
// start at 1 again, gives its messages IDs that no earlier message had.
func (q *Queue) name(cm *converted) {
	id := cm.stream + ":" + q.inc.tag(cm.stamp) + ":" + strconv.FormatUint(cm.seq, 10)
	cm.msg.ID, cm.msg.Position = id, id
}

// rebind binds the durable consumer again after a pull found none, making
// it when it is missing (unless BindOnly). A consumer made for a stream
// created again starts at its first message whatever Start says: every
// message of the new stream came after the start.
func (q *Queue) rebind(ctx context.Context) error {
	const op = "bind consumer"
	q.bindMu.Lock()
	defer q.bindMu.Unlock()
	if !q.stale.Load() {
		return nil
	}
	if err := q.checkStream(ctx, op); err != nil {
		return err
	}
	cfg := q.cfg
	q.consMu.Lock()
	recreated := q.boundTo != q.inc.newest().created
	q.consMu.Unlock()
	if recreated {
		cfg.Start = brokers.Earliest
	}
	cons, err := bindConsumer(ctx, q.c, cfg)
	if err != nil {
		return err
	}
	q.setConsumer(cons)
	q.stale.Store(false)
	return nil
}

// consumerGone reports whether a pull failed because the consumer is not
// there: deleted (with its stream or alone), or nobody answers its pull
// subject.
func consumerGone(err error) bool {
	return errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerNotFound) ||
		errors.Is(err, natsgo.ErrNoResponders)
}

// bindConsumer finds or makes the durable consumer.
func bindConsumer(ctx context.Context, c *conn, cfg QueueConfig) (jetstream.Consumer, error) {
	const op = "bind consumer"
	rctx, cancel := context.WithTimeout(ctx, cfg.Conn.RequestTimeout)
	defer cancel()
	for attempt := 0; ; attempt++ {
		cons, err := c.js.Consumer(rctx, cfg.Stream, cfg.Durable)
		switch {
		case err == nil && cfg.BindOnly:
			return cons, nil
		case err == nil:
			return updateConsumer(rctx, c, cfg, cons)
		case errors.Is(err, jetstream.ErrStreamNotFound):
			return nil, &brokers.Error{Op: op, Err: fmt.Errorf("stream %q not found", cfg.Stream)}
		case !errors.Is(err, jetstream.ErrConsumerNotFound):
			return nil, translate(op, fmt.Errorf("consumer %q on stream %q: %w", cfg.Durable, cfg.Stream, err))
		case cfg.BindOnly:
			return nil, &brokers.Error{Op: op, Err: fmt.Errorf("consumer %q not found on stream %q (BindOnly)", cfg.Durable, cfg.Stream)}
		}
		cons, err = c.js.CreateConsumer(rctx, cfg.Stream, consumerConfig(cfg))
		if err == nil {
			cfg.Conn.Logger.Info("nats: created durable consumer", "stream", cfg.Stream, "durable", cfg.Durable)
			return cons, nil
		}
		// Another node created it first: bind to it.
		if attempt == 0 && errors.Is(err, jetstream.ErrConsumerExists) {
			continue
		}
		return nil, translate(op, fmt.Errorf("create consumer %q on stream %q: %w", cfg.Durable, cfg.Stream, err))
	}
}

func consumerConfig(cfg QueueConfig) jetstream.ConsumerConfig {
	cc := jetstream.ConsumerConfig{
		Durable:       cfg.Durable,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cfg.AckWait,
		MaxAckPending: cfg.MaxAckPending,
		MaxDeliver:    -1,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}
	if cfg.Start == brokers.Latest {
		cc.DeliverPolicy = jetstream.DeliverNewPolicy
	}
	setFilter(&cc, cfg.FilterSubjects)
	return cc
}

// setFilter uses FilterSubject for one subject so that servers older than
// 2.10 (no FilterSubjects) work too.
func setFilter(cc *jetstream.ConsumerConfig, subjects []string) {
	switch len(subjects) {
	case 0:
	case 1:
		cc.FilterSubject = subjects[0]
	default:
		cc.FilterSubjects = slices.Clone(subjects)
	}
}

func filters(cc jetstream.ConsumerConfig) []string {
	if cc.FilterSubject != "" {
		return []string{cc.FilterSubject}
	}
	return cc.FilterSubjects
}

// updateConsumer brings the editable settings of an existing consumer to
// cfg's.
func updateConsumer(ctx context.Context, c *conn, cfg QueueConfig, cons jetstream.Consumer) (jetstream.Consumer, error) {
	cur := cons.CachedInfo().Config
	if cur.AckPolicy != jetstream.AckExplicitPolicy {
		return nil, &brokers.Error{Op: "bind consumer", Err: fmt.Errorf("consumer %q on stream %q has ack policy %s, want explicit", cfg.Durable, cfg.Stream, cur.AckPolicy)}
	}
	if cur.AckWait == cfg.AckWait && cur.MaxAckPending == cfg.MaxAckPending && slices.Equal(filters(cur), cfg.FilterSubjects) {
		return cons, nil
	}
	next := cur
	next.AckWait, next.MaxAckPending = cfg.AckWait, cfg.MaxAckPending
	next.FilterSubject, next.FilterSubjects = "", nil
	setFilter(&next, cfg.FilterSubjects)
	updated, err := c.js.UpdateConsumer(ctx, cfg.Stream, next)
	if err != nil {
		return nil, translate("bind consumer", fmt.Errorf("update consumer %q on stream %q: %w", cfg.Durable, cfg.Stream, err))
	}
	cfg.Conn.Logger.Info("nats: updated durable consumer", "stream", cfg.Stream, "durable", cfg.Durable,
		"ack_wait", cfg.AckWait, "max_ack_pending", cfg.MaxAckPending, "filter_subjects", cfg.FilterSubjects)
	return updated, nil
}

// Open returns a receiver for slot. Every receiver pulls from the same
// durable consumer; the server hands each message to one of them.
func (q *Queue) Open(ctx context.Context, slot string) (brokers.Receiver, error) {
	return open.Receiver(q.OpenReceiver(ctx, slot))
}

// OpenReceiver is Open returning the concrete type.
func (q *Queue) OpenReceiver(ctx context.Context, slot string) (*Receiver, error) {
	return lifetime.Add(ctx, &q.mu, &q.closed, "open", func() *Receiver {
		r := &Receiver{q: q, slot: slot, life: q.c.life.Child()}
		q.receivers[r] = struct{}{}
		return r
	})
}

// Close closes every receiver and the connection. Receives in flight
// return brokers.ErrClosed; messages not acked come back after AckWait.
// Closing twice is harmless.
func (q *Queue) Close() error {
	rs, first := lifetime.ShutAll(&q.mu, &q.closed, q.receivers)
	if !first {
		return nil
	}
	q.c.life.Close()
	for _, r := range rs {
		r.stop()
	}
	q.c.close()
	return nil
}

// Receiver is one consumer slot of a Queue. It implements brokers.Receiver
// and brokers.Extender.
type Receiver struct {
	q    *Queue
	slot string
	life lifetime.Life

	keepMu sync.Mutex
	keep   *keeper // started by the first Extend beyond AckWait
}

var (
	_ brokers.Receiver = (*Receiver)(nil)
	_ brokers.Extender = (*Receiver)(nil)
)

// Receive returns up to max messages, waiting up to wait for the first
// (see the package doc for how the wait is done). Each message stays in
// flight for AckWait. Lag is the consumer's count of messages not yet
// delivered.
func (r *Receiver) Receive(ctx context.Context, max int, wait time.Duration) (brokers.Result, error) {
	const op = "receive"
	if max <= 0 {
		return brokers.Result{}, maxErr(op, max)
	}
	if err := r.life.Check(ctx, op); err != nil {
		return brokers.Result{}, err
	}
	octx, done := r.life.Op(ctx)
	defer done()
	if r.q.stale.Load() {
		if err := r.q.rebind(octx); err != nil {
			return brokers.Result{}, r.life.Finish(ctx, op, err)
		}
	}
	p, err := r.q.c.pull(octx, op, r.q.consumer(), max, wait, queueProbe, r.q.conv)
	if err != nil {
		if consumerGone(err) {
			r.q.stale.Store(true)
		}
		return brokers.Result{}, r.life.Finish(ctx, op, err)
	}
	var newest int64
	for _, cm := range p.msgs {
		if cm.err == nil && cm.stamp > newest {
			newest = cm.stamp
		}
	}
	if len(p.msgs) > 0 && !r.q.inc.covers(newest) {
		if err := r.q.cover(octx, op, newest); err != nil {
			// Without knowing the stream's life the messages cannot be
			// named: give them back at once.
			for _, cm := range p.msgs {
				if cm.err == nil {
					_ = cm.msg.Handle.(jetstream.Msg).Nak()
				}
			}
			return brokers.Result{}, r.life.Finish(ctx, op, err)
		}
	}
	res := brokers.Result{Lag: -1}
	if len(p.msgs) > 0 {
		res.Messages = make([]brokers.Message, 0, len(p.msgs))
	}
	var fresh time.Time // the newest of the messages delivered the first time
	for i := range p.msgs {
		cm := &p.msgs[i]
		if cm.err != nil {
			// Not a JetStream message: nothing to ack, nothing to apply.
			r.q.cfg.Conn.Logger.Warn("nats: dropped a message without JetStream metadata", "slot", r.slot, "err", cm.err)
			continue
		}
		r.q.name(cm)
		res.Messages = append(res.Messages, cm.msg)
		res.Lag = int64(cm.pending)
		if cm.msg.Deliveries == 1 && cm.msg.Time.After(fresh) {
			fresh = cm.msg.Time
		}
	}
	switch {
	case len(res.Messages) == 0:
		res.Lag, res.Oldest = r.lag(octx)
	case res.Lag > 0:
		// The consumer delivers new messages in stream order: the next
		// one waiting is no older than the newest delivered the first time.
		res.Oldest = fresh
	}
	return res, nil
}

// lag asks the server how many messages the consumer has not delivered,
// -1 when it cannot say, and when some are, the time of the first of them
// (zero when it cannot say). It runs only after an empty receive: with
// messages waiting, that is a consumer at its max_ack_pending.
func (r *Receiver) lag(ctx context.Context) (int64, time.Time) {
	if r.q.c.ready("lag") != nil {
		return -1, time.Time{}
	}
	ictx, cancel := context.WithTimeout(ctx, r.q.cfg.Conn.RequestTimeout)
	defer cancel()
	info, err := r.q.consumer().Info(ictx)
	if err != nil {
		return -1, time.Time{}
	}
	if info.NumPending == 0 {
		return 0, time.Time{}
	}
	return int64(info.NumPending), r.q.firstAfter(ictx, info)
}

// firstAfter is the time of the first message after the consumer's last
// delivered one that its filter takes, zero when it cannot say (several
// filter subjects: the server finds the next message of one subject).
func (q *Queue) firstAfter(ctx context.Context, info *jetstream.ConsumerInfo) time.Time {
	subject := ">"
	switch fs := filters(info.Config); {
	case len(fs) == 1:
		subject = fs[0]
	case len(fs) > 1:
		return time.Time{}
	}
	st, err := q.c.js.Stream(ctx, q.cfg.Stream)
	if err != nil {
		return time.Time{}
	}
	m, err := st.GetMsg(ctx, info.Delivered.Stream+1, jetstream.WithGetMsgSubject(subject))
	if err != nil {
		return time.Time{}
	}
	return m.Time
}

// settle runs one acknowledgement kind on msgs and returns once the server
// has received them: after the acks it flushes the connection (one round
// trip per batch), or, with DoubleAck, each ack waited for its
// confirmation. So an ack that returned nil is not lost with a connection
// that drops right after. A message already acked or nacked through its
// handle is skipped: only its latest delivery counts, as the dedupe table
// makes a late ack harmless.
func (r *Receiver) settle(ctx context.Context, op string, msgs []brokers.Message, confirmed bool, each func(context.Context, jetstream.Msg) error) error {
	if err := r.life.Check(ctx, op); err != nil {
		return err
	}
	for _, m := range msgs {
		if _, ok := m.Handle.(jetstream.Msg); !ok {
			return &brokers.Error{Op: op, Err: fmt.Errorf("message %q was not received from a nats queue", m.ID)}
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	if err := r.q.c.ready(op); err != nil {
		return err
	}
	octx, done := r.life.Op(ctx)
	defer done()
	// Flush and DoubleAck need a deadline; the caller's wins when earlier.
	octx, cancel := context.WithTimeout(octx, r.q.cfg.Conn.RequestTimeout)
	defer cancel()
	for _, m := range msgs {
		if err := each(octx, m.Handle.(jetstream.Msg)); err != nil && !errors.Is(err, jetstream.ErrMsgAlreadyAckd) {
			return r.life.Finish(ctx, op, err)
		}
	}
	if !confirmed {
		if err := r.q.c.nc.FlushWithContext(octx); err != nil {
			return r.life.Finish(ctx, op, err)
		}
	}
	return nil
}

// Ack acknowledges msgs. With QueueConfig.DoubleAck each ack waits for the
// server's confirmation; otherwise Ack returns once the server has received
// the acks (a flush).
func (r *Receiver) Ack(ctx context.Context, msgs []brokers.Message) error {
	r.forget(msgs)
	return r.settle(ctx, "ack", msgs, r.q.cfg.DoubleAck, func(ctx context.Context, m jetstream.Msg) error {
		if r.q.cfg.DoubleAck {
			return m.DoubleAck(ctx)
		}
		return m.Ack()
	})
}

// Nack gives msgs back (NAK): the server delivers them again after delay,
// at once for 0.
func (r *Receiver) Nack(ctx context.Context, msgs []brokers.Message, delay time.Duration) error {
	r.forget(msgs)
	return r.settle(ctx, "nack", msgs, false, func(_ context.Context, m jetstream.Msg) error {
		if delay > 0 {
			return m.NakWithDelay(delay)
		}
		return m.Nak()
	})
}

// Extend keeps msgs in flight for at least d from now. JetStream can only
// restart a message's AckWait (an in-progress ack), so Extend sends one at
// once and, when d is longer than AckWait, the receiver keeps sending them
// every AckWait/3 on a goroutine of its own until d has passed, or until
// the message is acked or nacked through this receiver, or the receiver
// closes.
func (r *Receiver) Extend(ctx context.Context, msgs []brokers.Message, d time.Duration) error {
	err := r.settle(ctx, "extend", msgs, false, func(_ context.Context, m jetstream.Msg) error { return m.InProgress() })
	if err != nil || d <= r.q.cfg.AckWait {
		return err
	}
	hs := make([]jetstream.Msg, len(msgs))
	for i, m := range msgs {
		hs[i] = m.Handle.(jetstream.Msg) // checked by settle
	}
	until := time.Now().Add(d - r.q.cfg.AckWait)
	r.keepMu.Lock()
	defer r.keepMu.Unlock()
	if r.life.Closed() {
		return lifetime.ClosedErr("extend")
	}
	if r.keep == nil {
		r.keep = startKeeper(r.q.c, r.q.cfg.AckWait/3, r.q.cfg.Conn.Logger)
	}
	r.keep.add(hs, until)
	return nil
}

// forget stops keeping msgs in progress.
func (r *Receiver) forget(msgs []brokers.Message) {
	r.keepMu.Lock()
	k := r.keep
	r.keepMu.Unlock()
	if k == nil {
		return
	}
	for _, m := range msgs {
		if jm, ok := m.Handle.(jetstream.Msg); ok {
			k.remove(jm)
		}
	}
}

// Close releases the receiver: a receive in flight returns ErrClosed, and
// its unacknowledged messages come back after AckWait. Closing twice is
// harmless.
func (r *Receiver) Close() error {
	lifetime.Leave(&r.q.mu, r.q.receivers, r)
	r.stop()
	return nil
}

func (r *Receiver) stop() {
	r.life.Close()
	r.keepMu.Lock()
	k := r.keep
	r.keep = nil
	r.keepMu.Unlock()
	if k != nil {
		k.stop()
	}
}
