package memory

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/brokers"
)

func newTestQueue(t *testing.T, deadline time.Duration) (*Queue, *fakeClock) {
	t.Helper()
	return onFakeClock(t, func(c *fakeClock) (*Queue, error) { return NewQueue(QueueConfig{AckDeadline: deadline, Clock: c}) })
}

// mustQueue is a new wall-clock queue of cfg.
func mustQueue(t *testing.T, cfg QueueConfig) *Queue {
	t.Helper()
	return mustNew(t, NewQueue, cfg)
}

func sendN(q *Queue, n int) []string {
	var ids []string
	for i := range n {
		ids = append(ids, q.Send(brokers.Message{Value: []byte(fmt.Sprint("v", i))})...)
	}
	return ids
}

func ids(msgs []brokers.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.ID
	}
	return out
}

func openReceiver(t *testing.T, q *Queue, slot string) *Receiver {
	t.Helper()
	r, err := q.OpenReceiver(context.Background(), slot)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func receive(t *testing.T, r *Receiver, max int) []brokers.Message {
	t.Helper()
	res, err := r.Receive(context.Background(), max, 0)
	if err != nil {
		t.Fatal(err)
	}
	return res.Messages
}

type counts struct{ pending, inFlight, acked int }

func queueCounts(q *Queue) counts { return counts{q.Pending(), q.InFlight(), q.Acked()} }

func TestQueueConfig(t *testing.T) {
	if _, err := NewQueue(QueueConfig{AckDeadline: -time.Second}); err == nil {
		t.Fatal("negative deadline accepted")
	}
	q, err := NewQueue(QueueConfig{})
	if err != nil || q.deadline != DefaultAckDeadline {
		t.Fatalf("default deadline = %v, %v", q.deadline, err)
	}
}

func TestSendIDs(t *testing.T) {
	q, c := newTestQueue(t, time.Minute)
	got := q.Send(brokers.Message{Value: []byte("a")}, brokers.Message{Value: []byte("b")})
	if want := []string{"m-1", "m-2"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("ids = %v, want %v", got, want)
	}
	r := openReceiver(t, q, "slot-0")
	msgs := receive(t, r, 10)
	for _, m := range msgs {
		if m.ID != m.Position || m.Deliveries != 1 || !m.Time.Equal(c.Now()) {
			t.Fatalf("message = %+v", m)
		}
	}
}

func TestQueueLifecycle(t *testing.T) {
	ctx := context.Background()
	type step struct {
		do   func(t *testing.T, q *Queue, c *fakeClock, r [2]*Receiver, held map[string][]brokers.Message)
		want counts
	}
	recv := func(i, max int, wantIDs ...string) func(*testing.T, *Queue, *fakeClock, [2]*Receiver, map[string][]brokers.Message) {
		return func(t *testing.T, q *Queue, c *fakeClock, r [2]*Receiver, held map[string][]brokers.Message) {
			msgs := receive(t, r[i], max)
			if got := ids(msgs); strings.Join(got, ",") != strings.Join(wantIDs, ",") {
				t.Fatalf("receiver %d got %v, want %v", i, got, wantIDs)
			}
			held[fmt.Sprint(i)] = msgs
		}
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"ack removes", []step{
			{recv(0, 2, "m-1", "m-2"), counts{1, 2, 0}},
			{func(t *testing.T, q *Queue, c *fakeClock, r [2]*Receiver, held map[string][]brokers.Message) {
				if err := r[0].Ack(ctx, held["0"]); err != nil {
					t.Fatal(err)
				}
			}, counts{1, 0, 2}},
			{func(t *testing.T, q *Queue, c *fakeClock, r [2]*Receiver, held map[string][]brokers.Message) {
				c.Advance(time.Hour)
			}, counts{1, 0, 2}},
			{recv(1, 10, "m-3"), counts{0, 1, 2}},
		}},
		{"two receivers never share", []step{
			{recv(0, 2, "m-1", "m-2"), counts{1, 2, 0}},
			{recv(1, 5, "m-3"), counts{0, 3, 0}},
			{recv(0, 5), counts{0, 3, 0}},
		}},
		{"deadline redelivers", []step{
			{recv(0, 1, "m-1"), counts{2, 1, 0}},
			{func(t *testing.T, q *Queue, c *fakeClock, r [2]*Receiver, held map[string][]brokers.Message) {
				c.Advance(59 * time.Second)
			}, counts{2, 1, 0}},
			{recv(1, 1, "m-2"), counts{1, 2, 0}},
			{func(t *testing.T, q *Queue, c *fakeClock, r [2]*Receiver, held map[string][]brokers.Message) {
				c.Advance(time.Second)
			}, counts{2, 1, 0}},
			{func(t *testing.T, q *Queue, c *fakeClock, r [2]*Receiver, held map[string][]brokers.Message) {
				old := held["0"]
				msgs := receive(t, r[1], 1)
				if ids(msgs)[0] != "m-1" || msgs[0].Deliveries != 2 {
					t.Fatalf("redelivery = %+v", msgs)
				}
				// The late ack of the first delivery is ignored.
				if err := r[0].Ack(ctx, old); err != nil {
					t.Fatal(err)
				}
			}, counts{1, 2, 0}},
		}},
		{"nack with delay", []step{
			{recv(0, 1, "m-1"), counts{2, 1, 0}},
			{func(t *testing.T, q *Queue, c *fakeClock, r [2]*Receiver, held map[string][]brokers.Message) {
				if err := r[0].Nack(ctx, held["0"], 10*time.Second); err != nil {
					t.Fatal(err)
				}
			}, counts{3, 0, 0}},
			{recv(1, 5, "m-2", "m-3"), counts{1, 2, 0}},
			{func(t *testing.T, q *Queue, c *fakeClock, r [2]*Receiver, held map[string][]brokers.Message) {
				c.Advance(10 * time.Second)
				msgs := receive(t, r[0], 5)
				if got := ids(msgs); !reflect.DeepEqual(got, []string{"m-1"}) || msgs[0].Deliveries != 2 {
					t.Fatalf("after nack delay got %+v", msgs)
				}
			}, counts{0, 3, 0}},
		}},
		{"nack without delay", []step{
			{recv(0, 3, "m-1", "m-2", "m-3"), counts{0, 3, 0}},
			{func(t *testing.T, q *Queue, c *fakeClock, r [2]*Receiver, held map[string][]brokers.Message) {
				if err := r[0].Nack(ctx, held["0"][1:2], 0); err != nil {
					t.Fatal(err)
				}
			}, counts{1, 2, 0}},
			{recv(1, 5, "m-2"), counts{0, 3, 0}},
		}},
		{"dropped ack", []step{
			{recv(0, 1, "m-1"), counts{2, 1, 0}},
			{func(t *testing.T, q *Queue, c *fakeClock, r [2]*Receiver, held map[string][]brokers.Message) {
				q.DropAcks(1)
				if err := r[0].Ack(ctx, held["0"]); err != nil {
					t.Fatal(err)
				}
				c.Advance(time.Minute)
			}, counts{3, 0, 0}},
			{recv(0, 1, "m-1"), counts{2, 1, 0}},
			{func(t *testing.T, q *Queue, c *fakeClock, r [2]*Receiver, held map[string][]brokers.Message) {
				if err := r[0].Ack(ctx, held["0"]); err != nil {
					t.Fatal(err)
				}
			}, counts{2, 0, 1}},
		}},
		{"extend", []step{
			{recv(0, 1, "m-1"), counts{2, 1, 0}},
			{func(t *testing.T, q *Queue, c *fakeClock, r [2]*Receiver, held map[string][]brokers.Message) {
				c.Advance(50 * time.Second)
				if err := r[0].Extend(ctx, held["0"], 2*time.Minute); err != nil {
					t.Fatal(err)
				}
				c.Advance(100 * time.Second)
			}, counts{2, 1, 0}},
			{recv(1, 5, "m-2", "m-3"), counts{0, 3, 0}},
		}},
		{"closed receiver keeps messages in flight", []step{
			{recv(0, 1, "m-1"), counts{2, 1, 0}},
			{func(t *testing.T, q *Queue, c *fakeClock, r [2]*Receiver, held map[string][]brokers.Message) {
				if err := r[0].Close(); err != nil {
					t.Fatal(err)
				}
				if _, err := r[0].Receive(ctx, 1, 0); !errors.Is(err, brokers.ErrClosed) {
					t.Fatalf("receive after close: %v", err)
				}
				if err := r[0].Ack(ctx, held["0"]); !errors.Is(err, brokers.ErrClosed) {
					t.Fatalf("ack after close: %v", err)
				}
			}, counts{2, 1, 0}},
			{func(t *testing.T, q *Queue, c *fakeClock, r [2]*Receiver, held map[string][]brokers.Message) {
				c.Advance(time.Minute)
			}, counts{3, 0, 0}},
			{recv(1, 1, "m-1"), counts{2, 1, 0}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, c := newTestQueue(t, time.Minute)
			sendN(q, 3)
			r := [2]*Receiver{openReceiver(t, q, "slot-0"), openReceiver(t, q, "slot-1")}
			held := map[string][]brokers.Message{}
			for i, s := range tt.steps {
				s.do(t, q, c, r, held)
				if got := queueCounts(q); got != s.want {
					t.Fatalf("step %d: counts %+v, want %+v", i, got, s.want)
				}
			}
		})
	}
}

func TestAckForeignMessage(t *testing.T) {
	q, _ := newTestQueue(t, time.Minute)
	q2, _ := newTestQueue(t, time.Minute)
	q2.Send(brokers.Message{})
	r2 := openReceiver(t, q2, "s")
	foreign := receive(t, r2, 1)
	r := openReceiver(t, q, "s")
	for name, call := range map[string]func() error{
		"ack":    func() error { return r.Ack(context.Background(), foreign) },
		"nack":   func() error { return r.Nack(context.Background(), foreign, 0) },
		"extend": func() error { return r.Extend(context.Background(), foreign, time.Second) },
		"nohandle": func() error {
			return r.Ack(context.Background(), []brokers.Message{{ID: "m-1"}})
		},
	} {
		if err := call(); err == nil || brokers.Retryable(err) {
			t.Errorf("%s of a foreign message: %v, want a non-retryable error", name, err)
		}
	}
}

func TestReceiveWaitVirtual(t *testing.T) {
	q, c := newTestQueue(t, time.Minute)
	sendN(q, 1)
	r := openReceiver(t, q, "s")
	first := receive(t, r, 1)
	if err := r.Nack(context.Background(), first, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	// The wait is cut to when the nacked message is due; a pauser that
	// moves the clock then gets it in the same call.
	ctx, p := virtualCtx(c, true)
	res, err := r.Receive(ctx, 1, 20*time.Second)
	if err != nil || len(res.Messages) != 1 {
		t.Fatalf("receive = %+v, %v", res, err)
	}
	if got := p.Waits(); !reflect.DeepEqual(got, []time.Duration{3 * time.Second}) {
		t.Fatalf("waits = %v, want [3s]", got)
	}
	// With a clock that does not move, the call waits once and returns.
	ctx2, p2 := virtualCtx(c, false)
	res, err = r.Receive(ctx2, 1, 20*time.Second)
	if err != nil || len(res.Messages) != 0 {
		t.Fatalf("receive = %+v, %v", res, err)
	}
	if got := p2.Waits(); !reflect.DeepEqual(got, []time.Duration{20 * time.Second}) {
		t.Fatalf("waits = %v, want [20s]", got)
	}
}

func TestReceiveReturnsEarlyOnWallClock(t *testing.T) {
	q := mustQueue(t, QueueConfig{})
	defer q.Close()
	waiting := signalWaits(&q.testHookWait)
	r := openReceiver(t, q, "s")
	go func() { <-waiting; q.Send(brokers.Message{Value: []byte("x")}) }()
	start := time.Now()
	res, err := r.Receive(context.Background(), 5, time.Minute)
	if err != nil || len(res.Messages) != 1 {
		t.Fatalf("receive = %+v, %v", res, err)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Fatalf("receive took %v", el)
	}
}

func TestReceiveCancelledAndClosed(t *testing.T) {
	q := mustQueue(t, QueueConfig{})
	waiting := signalWaits(&q.testHookWait)
	r := openReceiver(t, q, "s")
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-waiting; cancel() }()
	if _, err := r.Receive(ctx, 5, time.Minute); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled receive: %v", err)
	}
	go func() { <-waiting; _ = q.Close() }()
	if _, err := r.Receive(context.Background(), 5, time.Minute); !errors.Is(err, brokers.ErrClosed) {
		t.Fatalf("receive during close: %v", err)
	}
	if _, err := q.Open(context.Background(), "s"); !errors.Is(err, brokers.ErrClosed) {
		t.Fatalf("open after close: %v", err)
	}
	if got := q.Send(brokers.Message{}); got != nil {
		t.Fatalf("send after close = %v", got)
	}
}

func TestConcurrentReceiversNeverShare(t *testing.T) {
	q := mustQueue(t, QueueConfig{AckDeadline: time.Hour})
	defer q.Close()
	const n = 2000
	sendN(q, n)
	var (
		mu   sync.Mutex
		seen = map[string]int{}
		wg   sync.WaitGroup
	)
	for i := range 4 {
		r := openReceiver(t, q, fmt.Sprint("slot-", i))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range n { // bounded: each round takes at least one message
				res, err := r.Receive(context.Background(), 7, 0)
				if err != nil {
					t.Error(err)
					return
				}
				if len(res.Messages) == 0 {
					return
				}
				mu.Lock()
				for _, m := range res.Messages {
					seen[m.ID]++
				}
				mu.Unlock()
				if err := r.Ack(context.Background(), res.Messages[:len(res.Messages)/2]); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if len(seen) != n {
		t.Fatalf("%d distinct messages received, want %d", len(seen), n)
	}
	for id, k := range seen {
		if k != 1 {
			t.Fatalf("%s received %d times", id, k)
		}
	}
}

func TestQueueFaults(t *testing.T) {
	ctx := context.Background()
	q, c := newTestQueue(t, time.Minute)
	sendN(q, 2)
	q.FailNext(OpOpen, 1, nil)
	if _, err := q.Open(ctx, "s"); !errors.Is(err, brokers.ErrInjected) || !brokers.Retryable(err) {
		t.Fatalf("open: %v", err)
	}
	r := openReceiver(t, q, "s")
	q.FailNext(OpReceive, 1, nil)
	if _, err := r.Receive(ctx, 1, 0); !errors.Is(err, brokers.ErrInjected) {
		t.Fatalf("receive: %v", err)
	}
	msgs := receive(t, r, 2)
	if len(msgs) != 2 {
		t.Fatalf("after a failed receive got %d messages", len(msgs))
	}
	q.FailNext(OpAck, 1, nil)
	if err := r.Ack(ctx, msgs[:1]); !errors.Is(err, brokers.ErrInjected) {
		t.Fatalf("ack: %v", err)
	}
	if q.Acked() != 0 {
		t.Fatal("a failed ack removed the message")
	}
	q.FailNext(OpNack, 1, nil)
	if err := r.Nack(ctx, msgs[1:], 0); !errors.Is(err, brokers.ErrInjected) {
		t.Fatalf("nack: %v", err)
	}
	if q.InFlight() != 2 {
		t.Fatal("a failed nack gave the message back")
	}
	q.FailNext(OpExtend, 1, nil)
	if err := r.Extend(ctx, msgs, time.Hour); !errors.Is(err, brokers.ErrInjected) {
		t.Fatalf("extend: %v", err)
	}
	vctx, p := virtualCtx(c, true)
	q.Delay(OpAck, 5*time.Second)
	if err := r.Ack(vctx, msgs); err != nil {
		t.Fatal(err)
	}
	if got := p.Waits(); !reflect.DeepEqual(got, []time.Duration{5 * time.Second}) {
		t.Fatalf("waits = %v", got)
	}
	if q.Acked() != 2 {
		t.Fatalf("acked = %d", q.Acked())
	}
}

func queueScript(t *testing.T) string {
	c := newFakeClock()
	q := mustQueue(t, QueueConfig{AckDeadline: 10 * time.Second, Clock: c})
	defer q.Close()
	ctx, _ := virtualCtx(c, true)
	var b strings.Builder
	log := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	strip := func(ms []brokers.Message) []brokers.Message {
		out := append([]brokers.Message(nil), ms...)
		for i := range out {
			out[i].Handle = nil
		}
		return out
	}
	log("send %v", sendN(q, 6))
	q.FailNext(OpReceive, 1, nil)
	q.DropAcks(1)
	rs := []*Receiver{openReceiver(t, q, "a"), openReceiver(t, q, "b")}
	for round := range 6 {
		for i, r := range rs {
			res, err := r.Receive(ctx, 2, 5*time.Second)
			log("round %d recv %d: %+v %v", round, i, strip(res.Messages), err)
			switch {
			case len(res.Messages) == 0:
			case round%3 == 0:
				log("ack %v", r.Ack(ctx, res.Messages))
			case round%3 == 1:
				log("nack %v", r.Nack(ctx, res.Messages, 3*time.Second))
			}
			c.Advance(2 * time.Second)
		}
		log("counts %+v", queueCounts(q))
	}
	return b.String()
}

func TestQueueDeterminism(t *testing.T) {
	a, b := queueScript(t), queueScript(t)
	if a != b {
		t.Fatalf("two runs differ:\n%s\n---\n%s", a, b)
	}
	if !strings.Contains(a, "injected") || !strings.Contains(a, "Deliveries:2") {
		t.Fatalf("script did not exercise faults and redelivery:\n%s", a)
	}
}

func TestQueueClientCloseLeavesBroker(t *testing.T) {
	ctx := context.Background()
	q, c := newTestQueue(t, time.Minute)
	sendN(q, 2)
	c1, c2 := q.NewClient(), q.NewClient()
	r1, err := c1.Open(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	r2, err := c2.Open(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if res, err := r1.Receive(ctx, 1, 0); err != nil || len(res.Messages) != 1 {
		t.Fatalf("receive = %+v, %v", res, err)
	}
	if err := c1.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r1.Receive(ctx, 1, 0); !errors.Is(err, brokers.ErrClosed) {
		t.Fatalf("receiver of a closed client: %v", err)
	}
	if _, err := c1.Open(ctx, "a"); !errors.Is(err, brokers.ErrClosed) {
		t.Fatalf("open on a closed client: %v", err)
	}
	// The closed client's message stays in flight until its deadline.
	if got := queueCounts(q); got != (counts{1, 1, 0}) {
		t.Fatalf("counts = %+v", got)
	}
	c.Advance(time.Minute)
	if res, err := r2.Receive(ctx, 5, 0); err != nil || len(res.Messages) != 2 {
		t.Fatalf("other client's receiver = %+v, %v", res, err)
	}
}

// oneInFlight is a queue with an ack deadline of 10 s on a fake clock,
// holding one message that receiver r (slot-0) received as msgs, and a
// second receiver, other (slot-1).
func oneInFlight(t *testing.T) (q *Queue, c *fakeClock, r, other *Receiver, msgs []brokers.Message) {
	t.Helper()
	q, c = newTestQueue(t, 10*time.Second)
	sendN(q, 1)
	r, other = openReceiver(t, q, "slot-0"), openReceiver(t, q, "slot-1")
	return q, c, r, other, receive(t, r, 1)
}

// An apply slower than the ack deadline, extended on a timer (issue 9,
// item 9): the message stays invisible to every other receiver for as
// long as the extensions come in time, and is acked once.
func TestExtendKeepsMessageInvisible(t *testing.T) {
	ctx := context.Background()
	q, c, r, other, msgs := oneInFlight(t)
	var ext brokers.Extender = r
	for i := range 6 { // 48 s in all, almost five deadlines
		c.Advance(8 * time.Second)
		if err := ext.Extend(ctx, msgs, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		if got := receive(t, other, 10); len(got) != 0 {
			t.Fatalf("after extension %d (%v in): delivered again %+v", i+1, time.Duration(i+1)*8*time.Second, got)
		}
		if got := queueCounts(q); got != (counts{0, 1, 0}) {
			t.Fatalf("after extension %d: counts %+v", i+1, got)
		}
	}
	if err := r.Ack(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Hour)
	if got := receive(t, other, 10); len(got) != 0 {
		t.Fatalf("delivered after the ack: %+v", got)
	}
	if got := queueCounts(q); got != (counts{0, 0, 1}) {
		t.Fatalf("counts = %+v, want one acked", got)
	}
}

// An extension that comes after the deadline does not take the message
// back: it is deliverable again (SQS: MessageNotInflight). Before, it
// revived the expired delivery whenever no other receiver had taken the
// message yet, which hid a too-slow extension timer from the simulator.
func TestExtendAfterDeadlineIsLate(t *testing.T) {
	ctx := context.Background()
	q, c, r, other, msgs := oneInFlight(t)
	c.Advance(10 * time.Second)
	if err := r.Extend(ctx, msgs, time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := queueCounts(q); got != (counts{1, 0, 0}) {
		t.Fatalf("after a late extension: counts %+v, want the message pending", got)
	}
	got := receive(t, other, 1)
	if len(got) != 1 || got[0].ID != msgs[0].ID || got[0].Deliveries != 2 {
		t.Fatalf("other receiver = %+v, want the message's second delivery", got)
	}
	// The first receiver's extension of its old delivery is ignored too.
	if err := r.Extend(ctx, msgs, time.Hour); err != nil {
		t.Fatal(err)
	}
	c.Advance(10 * time.Second)
	if got := queueCounts(q); got != (counts{1, 0, 0}) {
		t.Fatalf("the old delivery's extension kept the new one: counts %+v", got)
	}
}

func TestQueueRecreate(t *testing.T) {
	ctx := context.Background()
	q, c := newTestQueue(t, time.Minute)
	seen := map[string]bool{}
	note := func(ids []string) {
		for _, id := range ids {
			if seen[id] {
				t.Fatalf("id %s reused", id)
			}
			seen[id] = true
		}
	}
	note(sendN(q, 3))
	r := openReceiver(t, q, "slot-0")
	old := receive(t, r, 2)
	if err := q.Recreate(); err != nil {
		t.Fatal(err)
	}
	if got := queueCounts(q); got != (counts{0, 0, 0}) {
		t.Fatalf("after recreate: counts %+v, want an empty queue", got)
	}
	note(sendN(q, 2))
	// Settling a delivery of the old queue does nothing, and fails nothing.
	if err := r.Ack(ctx, old[:1]); err != nil {
		t.Fatal(err)
	}
	if err := r.Nack(ctx, old[1:], 0); err != nil {
		t.Fatal(err)
	}
	if got := queueCounts(q); got != (counts{2, 0, 0}) {
		t.Fatalf("after settling old deliveries: counts %+v", got)
	}
	got := receive(t, r, 10) // the receiver goes on with the new queue
	if want := []string{"m-4", "m-5"}; !reflect.DeepEqual(ids(got), want) {
		t.Fatalf("receive after recreate = %v, want %v", ids(got), want)
	}
	for _, m := range got {
		if m.Deliveries != 1 {
			t.Fatalf("first delivery of %s numbered %d", m.ID, m.Deliveries)
		}
	}
	if err := q.Recreate(); err != nil {
		t.Fatal(err)
	}
	note(sendN(q, 1))
	c.Advance(time.Hour)
	if got := receive(t, r, 10); !reflect.DeepEqual(ids(got), []string{"m-6"}) {
		t.Fatalf("after a second recreate: %v", ids(got))
	}
	_ = q.Close()
	if err := q.Recreate(); !errors.Is(err, brokers.ErrClosed) {
		t.Fatalf("recreate of a closed queue: %v", err)
	}
}

// A delayed settling call that is cancelled during its delay ends then:
// the receiver's next call is no misuse (before, the call stayed "in
// progress" until the end of its delay, and the next one was counted as
// overlapping it).
func TestCancelledDelayedCallEndsAtCancel(t *testing.T) {
	q, _ := newTestQueue(t, time.Minute)
	sendN(q, 1)
	r := openReceiver(t, q, "s")
	msgs := receive(t, r, 1)
	q.Delay(OpAck, time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := r.Ack(ctx, msgs); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ack during an hour's delay with a 20 ms deadline: %v", err)
	}
	q.Delay(OpAck, 0)
	if _, err := r.Receive(context.Background(), 1, 0); err != nil {
		t.Fatal(err)
	}
	if err := r.Extend(context.Background(), msgs, time.Second); err != nil {
		t.Fatal(err)
	}
	if m := q.Misuses(); len(m) > 0 {
		t.Fatalf("the call after a cancelled one counted as a misuse: %v", m)
	}
}
