package nats

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/brokertest"
)

// queueEnv is a server with one work-queue stream and a producer.
type queueEnv struct {
	ts      *testServer
	js      jetstream.JetStream
	stream  string
	subject string
}

func newQueueEnv(t *testing.T) *queueEnv {
	t.Helper()
	ts := startServer(t)
	_, js := ts.client(t)
	name := uniqueName("Q")
	ts.createStream(t, js, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}})
	return &queueEnv{ts: ts, js: js, stream: name, subject: name + ".jobs"}
}

func (e *queueEnv) config() QueueConfig {
	return QueueConfig{Conn: e.ts.connConfig(), Stream: e.stream, Durable: "drover", AckWait: 2 * time.Second}
}

func (e *queueEnv) open(t *testing.T, cfg QueueConfig) *Queue {
	t.Helper()
	return brokertest.Open(t, 10*time.Second, "NewQueue", func(ctx context.Context) (*Queue, error) {
		return NewQueue(ctx, cfg)
	})
}

func (e *queueEnv) publish(t *testing.T, subject string, value string, hdr map[string]string) uint64 {
	t.Helper()
	m := natsgo.NewMsg(subject)
	m.Data = []byte(value)
	for k, v := range hdr {
		m.Header.Set(k, v)
	}
	ack, err := e.js.PublishMsg(brokertest.Context(t, 10*time.Second), m)
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	return ack.Sequence
}

func openRecv(t *testing.T, q *Queue, slot string) *Receiver {
	t.Helper()
	return brokertest.Open(t, 5*time.Second, "open "+slot, func(ctx context.Context) (*Receiver, error) {
		return q.OpenReceiver(ctx, slot)
	})
}

// receiveN receives until n messages came or 20 s passed.
func receiveN(t *testing.T, r *Receiver, n int) ([]brokers.Message, brokers.Result) {
	t.Helper()
	return brokertest.PollN(t, brokertest.Context(t, 20*time.Second), "receive", r.Receive, n)
}

func TestQueueMessageFields(t *testing.T) {
	e := newQueueEnv(t)
	seq := e.publish(t, e.subject, `{"id":7}`, map[string]string{"key": "k-7", "trace": "abc", "Other": "x"})
	e.publish(t, e.subject+".42", `{}`, nil)
	cfg := e.config()
	cfg.Key.KeyFromSubject = true
	r := openRecv(t, e.open(t, cfg), "slot-0")
	got, _ := receiveN(t, r, 2)
	m := got[0]
	st, err := e.js.Stream(brokertest.Context(t, 5*time.Second), e.stream)
	if err != nil {
		t.Fatal(err)
	}
	wantID := fmt.Sprintf("%s:%d:%d", e.stream, st.CachedInfo().Created.UnixNano(), seq)
	if m.ID != wantID || m.Position != wantID || string(m.Key) != "k-7" || string(m.Value) != `{"id":7}` || m.Deliveries != 1 {
		t.Fatalf("message = %+v, want ID %s, key k-7, one delivery", m, wantID)
	}
	if time.Since(m.Time) > time.Minute || m.Time.After(time.Now().Add(time.Second)) {
		t.Fatalf("time %v is not the store time", m.Time)
	}
	if hs := brokertest.Headers(m); hs != "Other=x,key=k-7,trace=abc" {
		t.Fatalf("headers = %v, want sorted by name", hs)
	}
	if string(got[1].Key) != "42" {
		t.Fatalf("key from subject = %q, want 42", got[1].Key)
	}
	if _, ok := got[0].Handle.(jetstream.Msg); !ok {
		t.Fatalf("handle is %T", got[0].Handle)
	}
	if err := r.Ack(brokertest.Context(t, 5*time.Second), got); err != nil {
		t.Fatal(err)
	}

	// Without KeyFromSubject a message without the header has no key.
	e.publish(t, e.subject+".43", `{}`, nil)
	r2 := openRecv(t, e.open(t, e.config()), "slot-1")
	got, _ = receiveN(t, r2, 1)
	if got[0].Key != nil {
		t.Fatalf("key = %q, want none", got[0].Key)
	}
}

func TestQueueRedeliveryKeepsIDAndCountsDeliveries(t *testing.T) {
	e := newQueueEnv(t)
	e.publish(t, e.subject, "a", nil)
	r := openRecv(t, e.open(t, e.config()), "slot-0")
	first, _ := receiveN(t, r, 1)
	// A context without a deadline is fine (Flush needs one: the adapter
	// sets its own).
	if err := r.Nack(context.Background(), first, 0); err != nil {
		t.Fatal(err)
	}
	again, _ := receiveN(t, r, 1)
	if again[0].ID != first[0].ID || again[0].Deliveries != 2 {
		t.Fatalf("redelivery %+v after %+v: want the same ID and Deliveries 2", again[0], first[0])
	}
	// The first delivery's handle is spent: acking it again is harmless.
	if err := r.Ack(context.Background(), append(first, again...)); err != nil {
		t.Fatal(err)
	}
}

func TestQueueLag(t *testing.T) {
	e := newQueueEnv(t)
	for i := range 10 {
		e.publish(t, e.subject, fmt.Sprint(i), nil)
	}
	r := openRecv(t, e.open(t, e.config()), "slot-0")
	got, res := receiveN(t, r, 3)
	if res.Lag != 7 {
		t.Fatalf("lag after 3 of 10 = %d, want 7", res.Lag)
	}
	rest, _ := receiveN(t, r, 7)
	if err := r.Ack(brokertest.Context(t, 5*time.Second), append(got, rest...)); err != nil {
		t.Fatal(err)
	}
	res, err := r.Receive(brokertest.Context(t, 5*time.Second), 10, 0)
	if err != nil || len(res.Messages) != 0 || res.Lag != 0 {
		t.Fatalf("empty receive = %+v, %v; want lag 0", res, err)
	}
}

func TestQueueDoubleAck(t *testing.T) {
	e := newQueueEnv(t)
	e.publish(t, e.subject, "a", nil)
	cfg := e.config()
	cfg.DoubleAck = true
	q := e.open(t, cfg)
	r := openRecv(t, q, "slot-0")
	got, _ := receiveN(t, r, 1)
	if err := r.Ack(brokertest.Context(t, 5*time.Second), got); err != nil {
		t.Fatal(err)
	}
	info, err := q.consumer().Info(brokertest.Context(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if info.AckFloor.Stream != 1 || info.NumAckPending != 0 {
		t.Fatalf("after a double ack: ack floor %d, pending %d", info.AckFloor.Stream, info.NumAckPending)
	}
}

func TestQueueAckForeignMessage(t *testing.T) {
	e := newQueueEnv(t)
	r := openRecv(t, e.open(t, e.config()), "slot-0")
	err := r.Ack(brokertest.Context(t, 5*time.Second), []brokers.Message{{ID: "m-1", Handle: "receipt"}})
	if err == nil || brokers.Retryable(err) {
		t.Fatalf("ack of a foreign message: %v, want a non-retryable error", err)
	}
}

func TestQueueConsumerSetup(t *testing.T) {
	e := newQueueEnv(t)
	ctx := brokertest.Context(t, 10*time.Second)

	t.Run("missing stream", func(t *testing.T) {
		cfg := e.config()
		cfg.Stream = "NOPE"
		_, err := NewQueue(ctx, cfg)
		if err == nil || brokers.Retryable(err) || !strings.Contains(err.Error(), `stream "NOPE" not found`) {
			t.Fatalf("NewQueue on a missing stream: %v", err)
		}
	})
	t.Run("bind only without consumer", func(t *testing.T) {
		cfg := e.config()
		cfg.Durable, cfg.BindOnly = "elsewhere", true
		_, err := NewQueue(ctx, cfg)
		if err == nil || brokers.Retryable(err) || !strings.Contains(err.Error(), "BindOnly") {
			t.Fatalf("NewQueue BindOnly without a consumer: %v", err)
		}
	})
	t.Run("create then update", func(t *testing.T) {
		cfg := e.config()
		cfg.Durable = "upd"
		e.open(t, cfg)
		cfg.AckWait, cfg.MaxAckPending, cfg.FilterSubjects = 7*time.Second, 50, []string{e.subject}
		q := e.open(t, cfg)
		info, err := q.consumer().Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c := info.Config
		if c.AckWait != 7*time.Second || c.MaxAckPending != 50 || c.FilterSubject != e.subject || c.AckPolicy != jetstream.AckExplicitPolicy {
			t.Fatalf("consumer config after update = %+v", c)
		}
		// BindOnly leaves it as it is.
		cfg.AckWait, cfg.BindOnly = time.Second, true
		q = e.open(t, cfg)
		if info, err = q.consumer().Info(ctx); err != nil || info.Config.AckWait != 7*time.Second {
			t.Fatalf("BindOnly changed the consumer: %+v, %v", info, err)
		}
	})
	t.Run("start latest", func(t *testing.T) {
		e.publish(t, e.subject, "old", nil)
		cfg := e.config()
		cfg.Durable, cfg.Start = "latest", brokers.Latest
		r := openRecv(t, e.open(t, cfg), "slot-0")
		e.publish(t, e.subject, "new", nil)
		got, _ := receiveN(t, r, 1)
		if string(got[0].Value) != "new" {
			t.Fatalf("a Latest consumer got %q first", got[0].Value)
		}
	})
	t.Run("two nodes create at once", func(t *testing.T) {
		cfg := e.config()
		cfg.Durable = "race"
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				q, err := NewQueue(ctx, cfg)
				if err == nil {
					q.Close()
				}
				errs[i] = err
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("concurrent NewQueue: %v", err)
			}
		}
	})
}

// TestQueueExtendBeyondAckWait: Extend for three AckWaits keeps the message
// from every other receiver for that long, then it comes back.
func TestQueueExtendBeyondAckWait(t *testing.T) {
	e := newQueueEnv(t)
	e.publish(t, e.subject, "long", nil)
	cfg := e.config()
	cfg.AckWait = time.Second
	q := e.open(t, cfg)
	r := openRecv(t, q, "slot-0")
	got, _ := receiveN(t, r, 1)
	start := time.Now()
	if err := r.Extend(brokertest.Context(t, 5*time.Second), got, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	other := openRecv(t, q, "slot-1")
	ctx := brokertest.Context(t, 30*time.Second)
	for {
		res, err := other.Receive(ctx, 1, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Messages) == 0 {
			continue
		}
		el := time.Since(start)
		if el < 3*time.Second {
			t.Fatalf("an extended message came back after %v, before 3s", el)
		}
		if res.Messages[0].Deliveries != 2 {
			t.Fatalf("deliveries = %d, want 2", res.Messages[0].Deliveries)
		}
		break
	}
}

// TestQueueAckStopsKeeping: a message acked while kept in progress is not
// touched again (the keeper forgets it), and Close stops the keeper.
func TestQueueAckStopsKeeping(t *testing.T) {
	e := newQueueEnv(t)
	e.publish(t, e.subject, "a", nil)
	cfg := e.config()
	cfg.AckWait = 300 * time.Millisecond
	r := openRecv(t, e.open(t, cfg), "slot-0")
	got, _ := receiveN(t, r, 1)
	if err := r.Extend(brokertest.Context(t, 5*time.Second), got, time.Minute); err != nil {
		t.Fatal(err)
	}
	r.keepMu.Lock()
	k := r.keep
	r.keepMu.Unlock()
	if k == nil || len(k.until) != 1 {
		t.Fatal("Extend beyond AckWait did not keep the message")
	}
	if err := r.Ack(brokertest.Context(t, 5*time.Second), got); err != nil {
		t.Fatal(err)
	}
	k.mu.Lock()
	n := len(k.until)
	k.mu.Unlock()
	if n != 0 {
		t.Fatalf("after the ack the keeper still holds %d messages", n)
	}
	r.Close()
	select {
	case <-k.done:
	default:
		t.Fatal("Close did not stop the keeper")
	}
}

func TestQueueAuthAndSecrets(t *testing.T) {
	if isExternal() {
		t.Skip("needs an embedded server with a password")
	}
	const password = "pw-Zq8-never-logged"
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(),
		NoLog: true, NoSigs: true, Username: "drover", Password: password})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	nc, err := natsgo.Connect(s.ClientURL(), natsgo.UserInfo("drover", password))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := js.CreateStream(brokertest.Context(t, 5*time.Second), jetstream.StreamConfig{Name: "AUTH", Subjects: []string{"auth.>"}}); err != nil {
		t.Fatal(err)
	}

	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg := QueueConfig{Conn: ConnConfig{URLs: []string{s.ClientURL()}, User: "drover", Password: "wrong-" + password, Logger: logger},
		Stream: "AUTH", Durable: "d"}
	_, authErr := NewQueue(brokertest.Context(t, 10*time.Second), cfg)
	if authErr == nil {
		t.Fatal("NewQueue with a wrong password succeeded")
	}
	if brokers.Retryable(authErr) {
		t.Fatalf("an authorization failure is retryable: %v", authErr)
	}
	cfg.Conn.Password = password
	q, err := NewQueue(brokertest.Context(t, 10*time.Second), cfg)
	if err != nil {
		t.Fatalf("NewQueue with the password: %v", err)
	}
	logger.Info("config", "conn", cfg.Conn)
	q.Close()
	for _, out := range []string{authErr.Error(), logs.String()} {
		if strings.Contains(out, password) {
			t.Fatalf("the password shows in %q", out)
		}
	}
	if !strings.Contains(logs.String(), "connected") {
		t.Fatalf("nothing logged: %q", logs.String())
	}
}

func TestQueueConnectionDownIsRetryableAndFast(t *testing.T) {
	if isExternal() {
		t.Skip("needs an embedded server to stop")
	}
	e := newQueueEnv(t)
	r := openRecv(t, e.open(t, e.config()), "slot-0")
	e.ts.StopServer(t)
	t.Cleanup(func() { e.ts.StartServer(t) })
	ctx := brokertest.Context(t, 10*time.Second)
	// Wait until the client has noticed, then every call fails at once.
	deadline := time.Now().Add(5 * time.Second)
	for r.q.c.nc.Status() == natsgo.CONNECTED {
		if time.Now().After(deadline) {
			t.Fatal("the client did not notice the server is gone")
		}
		<-time.After(10 * time.Millisecond)
	}
	start := time.Now()
	_, err := r.Receive(ctx, 10, 30*time.Second)
	if err == nil || !brokers.Retryable(err) || time.Since(start) > time.Second {
		t.Fatalf("receive with the server down: %v after %v, want a retryable error at once", err, time.Since(start))
	}
	var be *brokers.Error
	if !errors.As(err, &be) || be.Op != "receive" {
		t.Fatalf("error %T %v is not a *brokers.Error of receive", err, err)
	}
}

func TestRetryableClassification(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{natsgo.ErrTimeout, true},
		{natsgo.ErrNoResponders, true},
		{natsgo.ErrConnectionClosed, true},
		{natsgo.ErrConnectionReconnecting, true},
		{jetstream.ErrNoHeartbeat, true},
		{jetstream.ErrJetStreamNotEnabled, true}, // 503: JetStream still starting
		{natsgo.ErrAuthorization, false},
		{jetstream.ErrStreamNotFound, false},
		{jetstream.ErrConsumerNotFound, false},
		{jetstream.ErrBadRequest, false},
		{fmt.Errorf("wrapped: %w", natsgo.ErrPermissionViolation), false},
		{errors.New("read tcp: connection reset by peer"), true},
	}
	for _, tt := range tests {
		err := translate("op", tt.err)
		var be *brokers.Error
		if !errors.As(err, &be) || be.Retryable != tt.want {
			t.Errorf("translate(%v) = %#v, want Retryable %v", tt.err, err, tt.want)
		}
		if errors.Is(err, tt.err) {
			t.Errorf("translate(%v) still wraps the client's error value", tt.err)
		}
	}
}

// TestQueueMaxAckPendingReached: with MaxAckPending messages in flight a
// receive gets nothing (no error) until one is acked.
func TestQueueMaxAckPendingReached(t *testing.T) {
	e := newQueueEnv(t)
	for i := range 5 {
		e.publish(t, e.subject, fmt.Sprint(i), nil)
	}
	cfg := e.config()
	cfg.MaxAckPending = 2
	cfg.AckWait = time.Minute
	r := openRecv(t, e.open(t, cfg), "slot-0")
	held, _ := receiveN(t, r, 2)
	for _, wait := range []time.Duration{0, 500 * time.Millisecond} {
		start := time.Now()
		res, err := r.Receive(brokertest.Context(t, 10*time.Second), 10, wait)
		if err != nil || len(res.Messages) != 0 {
			t.Fatalf("receive (wait %v) at MaxAckPending = %d messages, %v; want none and no error", wait, len(res.Messages), err)
		}
		if el := time.Since(start); el > wait+500*time.Millisecond {
			t.Fatalf("receive with wait %v took %v", wait, el)
		}
	}
	if err := r.Ack(brokertest.Context(t, 5*time.Second), held[:1]); err != nil {
		t.Fatal(err)
	}
	if got, _ := receiveN(t, r, 1); string(got[0].Value) != "2" {
		t.Fatalf("after an ack got %q, want 2", got[0].Value)
	}
}

// recreateStream deletes the queue's stream and creates it again under the
// same name (its sequences start at 1 again) and returns the new stream's
// creation time in Unix nanoseconds.
func (e *queueEnv) recreateStream(t *testing.T) int64 {
	t.Helper()
	if err := e.js.DeleteStream(brokertest.Context(t, 5*time.Second), e.stream); err != nil {
		t.Fatalf("delete stream: %v", err)
	}
	st := e.ts.createStream(t, e.js, jetstream.StreamConfig{Name: e.stream, Subjects: []string{e.stream + ".>"}})
	return st.CachedInfo().Created.UnixNano()
}

// receiveThrough receives n messages, taking retryable errors (a consumer
// that is not there yet) as a reason to try again.
func receiveThrough(t *testing.T, r *Receiver, n int) []brokers.Message {
	t.Helper()
	ctx := brokertest.Context(t, 20*time.Second)
	var got []brokers.Message
	var lastErr error
	for len(got) < n {
		res, err := r.Receive(ctx, n-len(got), 500*time.Millisecond)
		if err != nil {
			if !brokers.Retryable(err) || ctx.Err() != nil {
				t.Fatalf("receive after %d of %d: %v (before: %v)", len(got), n, err, lastErr)
			}
			lastErr = err
			continue
		}
		got = append(got, res.Messages...)
	}
	return got
}

// TestQueueIDsUniqueAcrossStreamRecreation: a stream deleted and created
// again starts its sequences at 1 again; the IDs of its messages must
// differ from every ID of the stream before (the dedupe table would drop
// them as duplicates), both when another node makes the durable consumer
// again and when the running queue does, and stay the same across
// redeliveries and a restart.
func TestQueueIDsUniqueAcrossStreamRecreation(t *testing.T) {
	e := newQueueEnv(t)
	q := e.open(t, e.config())
	r := openRecv(t, q, "slot-0")
	seen := map[string]string{} // id -> value
	take := func(life string, msgs []brokers.Message, created int64) {
		t.Helper()
		for _, m := range msgs {
			if prev, dup := seen[m.ID]; dup {
				t.Fatalf("%s: message %q got the ID %s of %q", life, m.Value, m.ID, prev)
			}
			seen[m.ID] = string(m.Value)
			if m.Position != m.ID {
				t.Fatalf("%s: position %q differs from ID %q", life, m.Position, m.ID)
			}
			if !strings.HasPrefix(m.ID, fmt.Sprintf("%s:%d:", e.stream, created)) {
				t.Errorf("%s: ID %q does not carry the stream's creation time %d", life, m.ID, created)
			}
		}
	}
	publish3 := func(life string) {
		for i := range 3 {
			e.publish(t, e.subject, fmt.Sprintf("%s-%d", life, i), nil)
		}
	}

	st, err := e.js.Stream(brokertest.Context(t, 5*time.Second), e.stream)
	if err != nil {
		t.Fatal(err)
	}
	publish3("first")
	first, _ := receiveN(t, r, 3)
	take("first life", first, st.CachedInfo().Created.UnixNano())
	if err := r.Ack(brokertest.Context(t, 5*time.Second), first); err != nil {
		t.Fatal(err)
	}

	// Second life: another node makes the durable consumer again; this
	// queue's receiver was not pulling meanwhile and sees no error.
	created := e.recreateStream(t)
	e.open(t, e.config())
	publish3("second")
	second := receiveThrough(t, r, 3)
	take("second life", second, created)

	// Redelivered and read by a restarted process: the same IDs.
	if err := r.Nack(brokertest.Context(t, 5*time.Second), second, 0); err != nil {
		t.Fatal(err)
	}
	r2 := openRecv(t, e.open(t, e.config()), "slot-1")
	again := receiveThrough(t, r2, 3)
	ids := func(ms []brokers.Message) map[string]bool {
		out := map[string]bool{}
		for _, m := range ms {
			out[m.ID] = true
		}
		return out
	}
	if a, b := ids(second), ids(again); fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("redelivered to a restarted queue with IDs %v, first delivered as %v", b, a)
	}
	for _, m := range again {
		if m.Deliveries < 2 {
			t.Fatalf("%s: deliveries %d, want a redelivery", m.ID, m.Deliveries)
		}
	}
	if err := r2.Ack(brokertest.Context(t, 5*time.Second), again); err != nil {
		t.Fatal(err)
	}

	// Third life: nobody makes the consumer; the running queue finds its
	// consumer gone and makes it again.
	created = e.recreateStream(t)
	publish3("third")
	third := receiveThrough(t, r, 3)
	take("third life", third, created)
	if err := r.Ack(brokertest.Context(t, 5*time.Second), third); err != nil {
		t.Fatal(err)
	}
}

// TestQueueExtendOnATimerKeepsMessage: what the runtime does for a batch
// in flight (issue 9, item 9): Extend by AckWait on a timer, several
// times an AckWait, for three AckWaits, then ack. No other receiver gets
// the message meanwhile, and the consumer delivered it once.
func TestQueueExtendOnATimerKeepsMessage(t *testing.T) {
	e := newQueueEnv(t)
	e.publish(t, e.subject, "slow", nil)
	cfg := e.config()
	cfg.AckWait = 600 * time.Millisecond
	q := e.open(t, cfg)
	r := openRecv(t, q, "slot-0")
	other := openRecv(t, q, "slot-1")
	got, _ := receiveN(t, r, 1)
	ctx := brokertest.Context(t, 30*time.Second)
	// The other receiver's waits pace the loop.
	for end := time.Now().Add(3 * cfg.AckWait); time.Now().Before(end); {
		if err := r.Extend(ctx, got, cfg.AckWait); err != nil {
			t.Fatalf("extend: %v", err)
		}
		res, err := other.Receive(ctx, 1, cfg.AckWait/3)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Messages) > 0 {
			t.Fatalf("a message kept in progress came to another receiver (deliveries %d)", res.Messages[0].Deliveries)
		}
	}
	if err := r.Ack(ctx, got); err != nil {
		t.Fatal(err)
	}
	res, err := other.Receive(ctx, 1, 2*cfg.AckWait)
	if err != nil || len(res.Messages) > 0 {
		t.Fatalf("after the ack: %d messages, %v; want none", len(res.Messages), err)
	}
	info, err := q.consumer().Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Delivered.Consumer != 1 || info.NumAckPending != 0 || info.NumRedelivered != 0 {
		t.Fatalf("consumer delivered %d times, %d pending, %d redelivered; want one delivery, acked",
			info.Delivered.Consumer, info.NumAckPending, info.NumRedelivered)
	}
}

// TestQueueOldestPending: a receive that leaves messages undelivered dates
// the next of them by the newest message it delivered the first time (the
// consumer delivers in stream order); an empty receive at max_ack_pending
// asks the server for the first undelivered message's own time; a drained
// consumer has lag 0 and no date.
func TestQueueOldestPending(t *testing.T) {
	e := newQueueEnv(t)
	for i := range 5 {
		e.publish(t, e.subject, fmt.Sprint(i), nil)
	}
	cfg := e.config()
	cfg.MaxAckPending = 2
	cfg.AckWait = time.Minute
	r := openRecv(t, e.open(t, cfg), "slot-0")
	held, res := receiveN(t, r, 2)
	if res.Lag != 3 || !res.Oldest.Equal(held[1].Time) {
		t.Fatalf("after 2 of 5: lag %d oldest %v, want 3 and %v (the newest delivered)", res.Lag, res.Oldest, held[1].Time)
	}
	res, err := r.Receive(brokertest.Context(t, 10*time.Second), 10, 0)
	if err != nil || len(res.Messages) != 0 {
		t.Fatalf("receive at max_ack_pending = %+v, %v; want none", res, err)
	}
	st, err := e.js.Stream(brokertest.Context(t, 5*time.Second), e.stream)
	if err != nil {
		t.Fatal(err)
	}
	third, err := st.GetMsg(brokertest.Context(t, 5*time.Second), 3)
	if err != nil {
		t.Fatal(err)
	}
	if res.Lag != 3 || !res.Oldest.Equal(third.Time) {
		t.Fatalf("empty receive: lag %d oldest %v, want 3 and %v (the third message's time)", res.Lag, res.Oldest, third.Time)
	}
	if err := r.Ack(brokertest.Context(t, 5*time.Second), held); err != nil {
		t.Fatal(err)
	}
	rest, _ := receiveN(t, r, 2)
	if err := r.Ack(brokertest.Context(t, 5*time.Second), rest); err != nil {
		t.Fatal(err)
	}
	last, _ := receiveN(t, r, 1)
	if err := r.Ack(brokertest.Context(t, 5*time.Second), last); err != nil {
		t.Fatal(err)
	}
	res, err = r.Receive(brokertest.Context(t, 5*time.Second), 10, 0)
	if err != nil || len(res.Messages) != 0 || res.Lag != 0 || !res.Oldest.IsZero() {
		t.Fatalf("drained: %+v, %v; want lag 0, no oldest", res, err)
	}
}
