package brokertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/drover-dev/drover/brokers"
)

// Queue definition names.
const (
	QueueFields         = "queue-fields-carried"
	QueueAck            = "queue-ack-removes"
	QueueNack           = "queue-nack-redelivers-after-delay"
	QueueDeadline       = "queue-unacked-comes-back-after-deadline"
	QueueExclusive      = "queue-receivers-never-share"
	QueueExtend         = "queue-extend-deadline"
	QueueMaxWait        = "queue-receive-waits-at-most-max-wait"
	QueueEarlyReturn    = "queue-receive-returns-early-when-data-arrives"
	QueueCancel         = "queue-receive-returns-when-cancelled"
	QueueClose          = "queue-close-releases-everything"
	QueueServerRestart  = "queue-server-restart"
	QueueConnectionLoss = "queue-connection-loss"
)

// askedDeadline is the ack deadline the queue definitions ask for.
const askedDeadline = 2 * time.Second

var queueDefs = []queueDef{
	{Definition{Name: QueueFields, Doc: "a received message has its value, a non-empty ID equal to its Position, and Deliveries 1 (or 0 when the broker does not say)"}, queueFields},
	{Definition{Name: QueueTraceContext, Doc: traceDoc}, queueTraceContext},
	{Definition{Name: QueueAck, Doc: "acked messages do not come back, even after the ack deadline"}, queueAck},
	{Definition{Name: QueueNack, Doc: "a nacked message comes back after its delay, not before, with a higher delivery count"}, queueNack},
	{Definition{Name: QueueDeadline, Doc: "an unacked message comes back after its ack deadline, not before"}, queueDeadline},
	{Definition{Name: QueueExclusive, Doc: "two receivers on different slots, receiving concurrently, never hold the same message at once, and every message is received"}, queueExclusive},
	{Definition{Name: QueueExtend, Doc: "Extend keeps a message from coming back at its first deadline", Needs: []Capability{CanExtend}}, queueExtend},
	{Definition{Name: QueueMaxWait, Doc: "an empty receive waits about max_wait and no longer; wait 0 returns at once"}, queueMaxWait},
	{Definition{Name: QueueEarlyReturn, Doc: "a receive waiting 60 s returns soon after a message is sent"}, queueEarlyReturn},
	{Definition{Name: QueueCancel, Doc: "a waiting receive returns ctx.Err() promptly when its context is cancelled, and the receiver then goes on"}, queueCancel},
	{Definition{Name: QueueClose, Doc: "Queue.Close ends a receive in flight with ErrClosed, later calls fail with ErrClosed, and no goroutine is left (goleak)"}, queueClose},
	{Definition{Name: QueueServerRestart, Doc: "with the server down, Receive returns in time with nothing or a retryable error; after it is back the same receiver gets new messages", Needs: []Capability{CanRestartServer}}, queueServerRestart},
	{Definition{Name: QueueConnectionLoss, Doc: "after the server drops every connection, the same receiver gets new messages and acks them (errors, if any, retryable)", Needs: []Capability{CanCutConnections}}, queueConnectionLoss},
}

func newQueue(t *testing.T, h QueueHarness, needs ...Capability) (QueueFixture, brokers.Queue) {
	t.Helper()
	f := h.NewQueue(t, QueueOptions{AckDeadline: askedDeadline})
	requireCaps(t, f, needs)
	q := f.Open(t)
	t.Cleanup(func() { _ = q.Close() })
	return f, q
}

func send(t *testing.T, f QueueFixture, msgs ...brokers.Message) {
	t.Helper()
	if err := f.Send(Context(t, opTimeout), msgs...); err != nil {
		t.Fatalf("send: %v", err)
	}
}

func openRecv(t *testing.T, q brokers.Queue, slot string) brokers.Receiver {
	t.Helper()
	r, err := q.Open(Context(t, opTimeout), slot)
	if err != nil {
		t.Fatalf("open %s: %v", slot, err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// receiveN receives until it has n messages or timeout passes; see collect.
func receiveN(t *testing.T, r brokers.Receiver, n int, timeout time.Duration, tolerateRetryable bool) []brokers.Message {
	t.Helper()
	return collect(t, "receive", r.Receive, n, timeout, tolerateRetryable)
}

// receiveNone receives for d and fails when a message comes.
func receiveNone(t *testing.T, r brokers.Receiver, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return
		}
		res, err := r.Receive(Context(t, left+opTimeout), 10, left)
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		if len(res.Messages) > 0 {
			t.Fatalf("received %v (deliveries %d), want nothing", values(res.Messages), res.Messages[0].Deliveries)
		}
	}
}

func ack(t *testing.T, r brokers.Receiver, msgs []brokers.Message) {
	t.Helper()
	if err := r.Ack(Context(t, opTimeout), msgs); err != nil {
		t.Fatalf("ack: %v", err)
	}
}

func valueCounts(msgs []brokers.Message) map[string]int {
	out := map[string]int{}
	for _, m := range msgs {
		out[string(m.Value)]++
	}
	return out
}

func sameSet(t *testing.T, got []brokers.Message, want []string) {
	t.Helper()
	seen := valueCounts(got)
	if len(got) != len(want) || len(seen) != len(want) {
		t.Fatalf("received %v, want each of %v once", values(got), want)
	}
	for _, w := range want {
		if seen[w] != 1 {
			t.Fatalf("received %v, want each of %v once", values(got), want)
		}
	}
}

func queueFields(t *testing.T, h QueueHarness) {
	f, q := newQueue(t, h)
	send(t, f, brokers.Message{Value: []byte(`{"id":1}`)})
	r := openRecv(t, q, "slot-0")
	m := receiveN(t, r, 1, readTimeout, false)[0]
	if string(m.Value) != `{"id":1}` || m.ID == "" || m.Position != m.ID {
		t.Fatalf("message = %+v", m)
	}
	if m.Deliveries != 1 && m.Deliveries != 0 {
		t.Fatalf("first delivery has Deliveries %d", m.Deliveries)
	}
	ack(t, r, []brokers.Message{m})
}

func queueAck(t *testing.T, h QueueHarness) {
	f, q := newQueue(t, h)
	send(t, f, numbered("m", 0, 5)...)
	r := openRecv(t, q, "slot-0")
	got := receiveN(t, r, 5, readTimeout, false)
	sameSet(t, got, wantValues("m", 0, 5))
	ack(t, r, got)
	receiveNone(t, r, f.AckDeadline()+2*time.Second)
}

func queueNack(t *testing.T, h QueueHarness) {
	f, q := newQueue(t, h)
	send(t, f, numbered("m", 0, 1)...)
	r := openRecv(t, q, "slot-0")
	first := receiveN(t, r, 1, readTimeout, false)
	const delay = time.Second
	nacked := time.Now()
	if err := r.Nack(Context(t, opTimeout), first, delay); err != nil {
		t.Fatalf("nack: %v", err)
	}
	again := receiveN(t, r, 1, f.AckDeadline()+readTimeout, false)
	if el := time.Since(nacked); el < delay*8/10 {
		t.Fatalf("nacked message came back after %v, before its delay %v", el, delay)
	}
	if string(again[0].Value) != "m-0" {
		t.Fatalf("redelivered %+v, want %+v", again[0], first[0])
	}
	checkRedelivery(t, first[0], again[0])
	ack(t, r, again)
}

func queueDeadline(t *testing.T, h QueueHarness) {
	f, q := newQueue(t, h)
	send(t, f, numbered("m", 0, 1)...)
	r := openRecv(t, q, "slot-0")
	first := receiveN(t, r, 1, readTimeout, false)
	received := time.Now()
	other := openRecv(t, q, "slot-1")
	again := receiveN(t, other, 1, f.AckDeadline()+readTimeout, false)
	if el := time.Since(received); el < f.AckDeadline()*8/10 {
		t.Fatalf("unacked message came back after %v, before its deadline %v", el, f.AckDeadline())
	}
	checkRedelivery(t, first[0], again[0])
	ack(t, other, again)
}

func queueExclusive(t *testing.T, h QueueHarness) {
	f, q := newQueue(t, h)
	const n = 60
	send(t, f, numbered("m", 0, n)...)
	var (
		mu       sync.Mutex
		holder   = map[string]int{} // message ID -> receiver holding it
		received []brokers.Message
		failure  error
	)
	ctx := Context(t, readTimeout)
	fail := func(err error) {
		mu.Lock()
		failure = err
		mu.Unlock()
	}
	work := func(i int, r brokers.Receiver) {
		for ctx.Err() == nil {
			mu.Lock()
			if len(received) >= n || failure != nil {
				mu.Unlock()
				return
			}
			mu.Unlock()
			res, err := r.Receive(ctx, 7, 500*time.Millisecond)
			if err != nil {
				if ctx.Err() == nil {
					fail(fmt.Errorf("receiver %d: receive: %w", i, err))
				}
				return
			}
			mu.Lock()
			for _, m := range res.Messages {
				if other, held := holder[m.ID]; held {
					failure = fmt.Errorf("message %s (%s) received by %d while %d holds it", m.ID, m.Value, i, other)
				}
				holder[m.ID] = i
				received = append(received, m)
			}
			mu.Unlock()
			if len(res.Messages) == 0 {
				continue
			}
			// The hold lasts until the ack has returned.
			if err := r.Ack(ctx, res.Messages); err != nil && ctx.Err() == nil {
				fail(fmt.Errorf("receiver %d: ack: %w", i, err))
				return
			}
			mu.Lock()
			for _, m := range res.Messages {
				delete(holder, m.ID)
			}
			mu.Unlock()
		}
	}
	r0, r1 := openRecv(t, q, "slot-0"), openRecv(t, q, "slot-1")
	d0 := async(func() { work(0, r0) })
	d1 := async(func() { work(1, r1) })
	<-d0
	<-d1
	if failure != nil {
		t.Fatal(failure)
	}
	sameSet(t, received, wantValues("m", 0, n))
}

func queueExtend(t *testing.T, h QueueHarness) {
	f, q := newQueue(t, h)
	send(t, f, numbered("m", 0, 1)...)
	r := openRecv(t, q, "slot-0")
	ext, ok := r.(brokers.Extender)
	if !ok {
		t.Fatalf("the plan runs this definition but %T is not a brokers.Extender", r)
	}
	got := receiveN(t, r, 1, readTimeout, false)
	if err := ext.Extend(Context(t, opTimeout), got, 3*f.AckDeadline()); err != nil {
		t.Fatalf("extend: %v", err)
	}
	other := openRecv(t, q, "slot-1")
	receiveNone(t, other, f.AckDeadline()+time.Second)
	ack(t, r, got)
}

func queueMaxWait(t *testing.T, h QueueHarness) {
	_, q := newQueue(t, h)
	checkMaxWait(t, "receive", openRecv(t, q, "slot-0").Receive)
}

func queueEarlyReturn(t *testing.T, h QueueHarness) {
	f, q := newQueue(t, h)
	r := openRecv(t, q, "slot-0")
	var (
		res brokers.Result
		err error
	)
	done := async(func() { res, err = r.Receive(Context(t, time.Minute+opTimeout), 10, time.Minute) })
	mustStillRun(t, done, "a receive on an empty queue")
	send(t, f, numbered("m", 0, 1)...)
	waitDone(t, done, 10*time.Second, "a receive after a message was sent")
	if err != nil || !slices.Equal(values(res.Messages), []string{"m-0"}) {
		t.Fatalf("receive = %v, %v", values(res.Messages), err)
	}
	ack(t, r, res.Messages)
}

func queueCancel(t *testing.T, h QueueHarness) {
	f, q := newQueue(t, h)
	r := openRecv(t, q, "slot-0")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var err error
	done := async(func() { _, err = r.Receive(ctx, 10, time.Minute) })
	mustStillRun(t, done, "a receive on an empty queue")
	cancel()
	waitDone(t, done, prompt, "a cancelled receive")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled receive: %v, want context.Canceled", err)
	}
	send(t, f, numbered("m", 0, 2)...)
	got := receiveN(t, r, 2, f.AckDeadline()+readTimeout, false)
	sameSet(t, got, wantValues("m", 0, 2))
	ack(t, r, got)
}

func queueClose(t *testing.T, h QueueHarness) {
	// A first instance receives once so that the harness's goroutines exist
	// before the snapshot.
	f, first, _ := receivingQueue(t, h)
	if err := first.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	ignore := goleak.IgnoreCurrent()

	q := f.Open(t)
	send(t, f, numbered("m", 1, 1)...)
	r0 := openRecv(t, q, "slot-0")
	got := receiveN(t, r0, 1, readTimeout, false)
	ack(t, r0, got)
	r1 := openRecv(t, q, "slot-1")
	if err := r1.Close(); err != nil {
		t.Fatalf("receiver close: %v", err)
	}
	pollClosed(t, "receive on a closed receiver", r1.Receive)
	closeEndsPoll(t, "receive", "queue", r0.Receive, q.Close)
	pollClosed(t, "receive after Close", r0.Receive)
	wantClosed(t, "ack after Close", r0.Ack(Context(t, opTimeout), got))
	_, err := q.Open(Context(t, opTimeout), "slot-2")
	wantClosed(t, "open after Close", err)
	if err := q.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	verifyNoLeaks(t, h, ignore)
}

func queueServerRestart(t *testing.T, h QueueHarness) {
	f, _, r := receivingQueue(t, h, CanRestartServer)
	startServer := stopServer(t, f)
	checkServerDown(t, "receive", r.Receive)
	startServer()
	eventually(t, readTimeout, "sending after the restart kept failing", func() bool {
		return f.Send(Context(t, opTimeout), numbered("m", 1, 2)...) == nil
	})
	got := receiveN(t, r, 2, readTimeout, true)
	sameSet(t, got, wantValues("m", 1, 2))
	ackEventually(t, r, got, "restart")
}

func queueConnectionLoss(t *testing.T, h QueueHarness) {
	f, _, r := receivingQueue(t, h, CanCutConnections)
	f.(ConnectionCutter).CutConnections(t)
	send(t, f, numbered("m", 1, 2)...)
	got := receiveN(t, r, 2, readTimeout, true)
	sameSet(t, got, wantValues("m", 1, 2))
	ackEventually(t, r, got, "connection loss")
}
