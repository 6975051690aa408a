package pubsub

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/grpc/codes"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/brokertest"
	"github.com/drover-dev/drover/internal/exec"
)

func openRecv(t *testing.T, q *Queue, slot string) *Receiver {
	t.Helper()
	return brokertest.Open(t, 5*time.Second, "open "+slot, func(ctx context.Context) (*Receiver, error) {
		return q.OpenReceiver(ctx, slot)
	})
}

func receiveN(t *testing.T, r *Receiver, n int) []brokers.Message {
	t.Helper()
	got, _ := brokertest.PollN(t, brokertest.Context(t, 20*time.Second), "receive", r.Receive, n)
	return got
}

func TestMessageFields(t *testing.T) {
	f := newFixture(t, 10*time.Second, false)
	id := f.srv.Publish(f.topic, []byte(`{"id":1}`), map[string]string{"key": "k-1", "b": "2", "a": "1"})
	f.srv.Publish(f.topic, []byte(`{}`), nil)
	r := openRecv(t, f.open(t, f.config()), "slot-0")
	got := receiveN(t, r, 2)
	if string(got[1].Value) == `{"id":1}` {
		got[0], got[1] = got[1], got[0]
	}
	m := got[0]
	if m.ID != id || m.Position != id || string(m.Key) != "k-1" || m.Deliveries != 0 {
		t.Fatalf("message = %+v, want ID %s and key k-1", m, id)
	}
	if time.Since(m.Time) > time.Minute {
		t.Fatalf("time %v is not the publish time", m.Time)
	}
	if hs := brokertest.Headers(m); hs != "a=1,b=2,key=k-1" {
		t.Fatalf("headers = %v", hs)
	}
	if _, ok := m.Handle.(ackID); !ok || m.Handle.(ackID) == "" {
		t.Fatalf("handle = %#v", m.Handle)
	}
	if got[1].Key != nil || got[1].Headers != nil {
		t.Fatalf("a message without attributes = %+v", got[1])
	}
	if err := r.Ack(brokertest.Context(t, 5*time.Second), got); err != nil {
		t.Fatal(err)
	}
}

// TestMessageIDsUniquePerPublish: the same data published twice arrives
// as two messages with two different ids, the ones the publishes returned
// (the dedupe id is unique per message, not per content).
func TestMessageIDsUniquePerPublish(t *testing.T) {
	f := newFixture(t, 10*time.Second, false)
	body := []byte(`{"same":"body"}`)
	sent := map[string]bool{f.srv.Publish(f.topic, body, nil): true, f.srv.Publish(f.topic, body, nil): true}
	if len(sent) != 2 {
		t.Fatalf("two publishes of one body returned ids %v", sent)
	}
	r := openRecv(t, f.open(t, f.config()), "slot-0")
	got := receiveN(t, r, 2)
	if got[0].ID == "" || got[0].ID == got[1].ID {
		t.Fatalf("two publishes of one body received with ids %q and %q, want two different ids", got[0].ID, got[1].ID)
	}
	for _, m := range got {
		if !sent[m.ID] || !bytes.Equal(m.Value, body) {
			t.Fatalf("received %q with id %q, published ids %v", m.Value, m.ID, sent)
		}
	}
	if err := r.Ack(brokertest.Context(t, 5*time.Second), got); err != nil {
		t.Fatal(err)
	}
}

func TestOrderingKeyIsKeyAndOrderHolds(t *testing.T) {
	f := newFixture(t, 10*time.Second, true)
	for _, v := range []string{"a1", "a2", "a3"} {
		f.srv.PublishOrdered(f.topic, []byte(v), map[string]string{"key": "ignored"}, "A")
	}
	q := f.open(t, f.config())
	if !q.ordered {
		t.Fatal("the subscription's ordering was not seen")
	}
	r0, r1 := openRecv(t, q, "slot-0"), openRecv(t, q, "slot-1")
	var order []string
	for len(order) < 3 {
		for _, r := range []*Receiver{r0, r1} {
			res, err := r.Receive(brokertest.Context(t, 5*time.Second), 10, 200*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			// One key is held by one receiver: never two of its messages
			// out at once.
			if len(res.Messages) > 1 {
				t.Fatalf("got %d messages of one ordering key at once", len(res.Messages))
			}
			for _, m := range res.Messages {
				if string(m.Key) != "A" {
					t.Fatalf("key = %q, want the ordering key", m.Key)
				}
				order = append(order, string(m.Value))
			}
			if err := r.Ack(brokertest.Context(t, 5*time.Second), res.Messages); err != nil {
				t.Fatal(err)
			}
		}
	}
	if strings.Join(order, ",") != "a1,a2,a3" {
		t.Fatalf("order = %v", order)
	}
}

func TestMaxMessagesCapsAReceive(t *testing.T) {
	f := newFixture(t, 10*time.Second, false)
	for range 20 {
		f.srv.Publish(f.topic, []byte("x"), nil)
	}
	cfg := f.config()
	cfg.MaxMessages = 5
	r := openRecv(t, f.open(t, cfg), "slot-0")
	res, err := r.Receive(brokertest.Context(t, 5*time.Second), 100, time.Second)
	if err != nil || len(res.Messages) != 5 || res.Lag != -1 || !res.Oldest.IsZero() {
		t.Fatalf("receive = %d messages, lag %d, oldest %v, %v; want 5, lag -1, no oldest (Pull tells neither)", len(res.Messages), res.Lag, res.Oldest, err)
	}
}

func TestDeadlineSeconds(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want int32
	}{{0, 0}, {-time.Second, 0}, {time.Millisecond, 1}, {time.Second, 1}, {1500 * time.Millisecond, 2}, {time.Hour, 600}} {
		if got := deadlineSeconds(tt.d); got != tt.want {
			t.Errorf("deadlineSeconds(%v) = %d, want %d", tt.d, got, tt.want)
		}
	}
}

func TestErrors(t *testing.T) {
	t.Run("missing subscription", func(t *testing.T) {
		f := newFixture(t, 10*time.Second, false)
		cfg := f.config()
		cfg.Subscription = "nope-nope"
		_, err := NewQueue(brokertest.Context(t, 5*time.Second), cfg)
		if err == nil || brokers.Retryable(err) || !strings.Contains(err.Error(), "NotFound") {
			t.Fatalf("NewQueue of a missing subscription: %v", err)
		}
	})
	for _, tt := range []struct {
		code  codes.Code
		retry bool
	}{{codes.Unavailable, true}, {codes.ResourceExhausted, true}, {codes.PermissionDenied, false}, {codes.NotFound, false}} {
		t.Run("pull "+tt.code.String(), func(t *testing.T) {
			srv := pstest.NewServer(pstest.WithErrorInjection("Pull", tt.code, "injected"))
			t.Cleanup(func() { _ = srv.Close() })
			f := &queueFixture{srv: srv, px: newProxy(t, srv.Addr), sub: "sub-err"}
			ctx := context.Background()
			if _, err := srv.GServer.CreateTopic(ctx, &pubsubpb.Topic{Name: "projects/" + testProject + "/topics/t"}); err != nil {
				t.Fatal(err)
			}
			if _, err := srv.GServer.CreateSubscription(ctx, &pubsubpb.Subscription{Name: "projects/" + testProject + "/subscriptions/sub-err", Topic: "projects/" + testProject + "/topics/t"}); err != nil {
				t.Fatal(err)
			}
			r := openRecv(t, f.open(t, f.config()), "slot-0")
			_, err := r.Receive(brokertest.Context(t, 5*time.Second), 1, 0)
			var be *brokers.Error
			if !errors.As(err, &be) || be.Retryable != tt.retry || be.Op != "receive" || !strings.Contains(err.Error(), "injected") {
				t.Fatalf("receive with %v injected: %#v, want Retryable %v", tt.code, err, tt.retry)
			}
		})
	}
	t.Run("foreign message", func(t *testing.T) {
		f := newFixture(t, 10*time.Second, false)
		r := openRecv(t, f.open(t, f.config()), "slot-0")
		err := r.Ack(brokertest.Context(t, 5*time.Second), []brokers.Message{{ID: "x", Handle: "not-an-ack-id"}})
		if err == nil || brokers.Retryable(err) {
			t.Fatalf("ack of a foreign message: %v", err)
		}
	})
}

func TestEmulatorHostFromEnvironment(t *testing.T) {
	f := newFixture(t, 10*time.Second, false)
	f.srv.Publish(f.topic, []byte("via env"), nil)
	t.Setenv("PUBSUB_EMULATOR_HOST", f.px.Addr())
	r := openRecv(t, f.open(t, Config{Project: testProject, Subscription: f.sub}), "slot-0")
	if got := receiveN(t, r, 1); string(got[0].Value) != "via env" {
		t.Fatalf("got %q", got[0].Value)
	}
}

func TestCredentialsFileNeverQuoted(t *testing.T) {
	const secret = "-----BEGIN PRIVATE KEY-----SECRET-Qz8-----"
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"type":"mystery","private_key":"`+secret+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	notJSON := filepath.Join(dir, "garbage.json")
	if err := os.WriteFile(notJSON, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	for _, path := range []string{bad, notJSON, filepath.Join(dir, "missing.json")} {
		cfg := Config{Project: testProject, Subscription: "sub-x", CredentialsFile: path,
			Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
		_, err := NewQueue(brokertest.Context(t, 5*time.Second), cfg)
		if err == nil || brokers.Retryable(err) || !strings.Contains(err.Error(), "CredentialsFile") {
			t.Fatalf("NewQueue with %s: %v", filepath.Base(path), err)
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "SECRET") {
			t.Fatalf("the error quotes the credentials: %v", err)
		}
	}
	if strings.Contains(logs.String(), "SECRET") {
		t.Fatalf("the logs quote the credentials: %s", logs.String())
	}
	good := filepath.Join(dir, "sa.json")
	if err := os.WriteFile(good, []byte(`{"type":"service_account"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if typ, err := credentialsType(good); err != nil || typ != "service_account" {
		t.Fatalf("credentialsType = %q, %v", typ, err)
	}
}

// pauser records the waits of a job, as the testkit's executor does.
type pauser struct {
	mu    sync.Mutex
	total time.Duration
	n     int
}

func (p *pauser) Pause(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total += d
	p.n++
}

// TestWaitUnderControlledTime: under an executor that controls time the
// receive records its whole wait (the first pause and then the rest) and
// returns at once instead of pulling thousands of times.
func TestWaitUnderControlledTime(t *testing.T) {
	f := newFixture(t, 10*time.Second, false)
	r := openRecv(t, f.open(t, f.config()), "slot-0")
	p := &pauser{}
	ctx := exec.WithPauser(brokertest.Context(t, 10*time.Second), p)
	start := time.Now()
	res, err := r.Receive(ctx, 10, time.Hour)
	if err != nil || len(res.Messages) != 0 {
		t.Fatalf("receive = %+v, %v", res, err)
	}
	if p.total != time.Hour {
		t.Fatalf("recorded waits add up to %v, want 1h", p.total)
	}
	if p.n > 2 || time.Since(start) > 5*time.Second {
		t.Fatalf("%d pauses in %v: the loop spins", p.n, time.Since(start))
	}
}

func TestQueueClosedCalls(t *testing.T) {
	f := newFixture(t, 10*time.Second, false)
	q := f.open(t, f.config())
	r := openRecv(t, q, "slot-0")
	q.Close()
	if _, err := r.Receive(brokertest.Context(t, time.Second), 1, 0); !errors.Is(err, brokers.ErrClosed) || brokers.Retryable(err) {
		t.Fatalf("receive after close: %v", err)
	}
	if err := r.Nack(brokertest.Context(t, time.Second), nil, 0); !errors.Is(err, brokers.ErrClosed) {
		t.Fatalf("nack after close: %v", err)
	}
}
