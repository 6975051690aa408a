package pubsub

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/brokertest"
	"github.com/drover-dev/drover/internal/tcpproxy"
)

// queuePlan runs every queue definition. Two notes for readers:
//   - queue-unacked-comes-back-after-deadline passes on pstest through unary
//     Pull: pstest makes a message whose ack deadline passed deliverable
//     again when the next Pull comes (it is its streaming delivery that
//     NOTES.md saw not redeliver).
//   - queue-server-restart is run against a TCP proxy in front of pstest
//     that refuses connections and then accepts them again on the same
//     port: pstest keeps its messages in memory only, so a real restart
//     would lose the subscription. The adapter sees what it would see of a
//     restart: connections refused, then a server on the same address.
var queuePlan = brokertest.Plan{Run: func() []string {
	var names []string
	for _, d := range brokertest.QueueDefinitions() {
		names = append(names, d.Name)
	}
	return names
}()}

func TestConformanceQueue(t *testing.T) {
	brokertest.RunQueue(t, queueHarness{}, queuePlan)
}

type queueHarness struct{}

var seq atomic.Int64

const testProject = "drover-test"

type queueFixture struct {
	srv      *pstest.Server
	px       *tcpproxy.Proxy
	topic    string
	sub      string
	deadline time.Duration
}

// newProxy starts a proxy in front of the server at addr, closed in
// t.Cleanup.
func newProxy(t *testing.T, addr string) *tcpproxy.Proxy {
	t.Helper()
	p, err := tcpproxy.New(addr)
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// newFixture starts pstest with a proxy in front, and a topic and a
// subscription with the given ack deadline (whole seconds, at least 1).
func newFixture(t *testing.T, deadline time.Duration, ordered bool) *queueFixture {
	t.Helper()
	srv := pstest.NewServer()
	t.Cleanup(func() { _ = srv.Close() })
	secs := max(int32((deadline+time.Second-1)/time.Second), 1)
	n := seq.Add(1)
	f := &queueFixture{
		srv:      srv,
		px:       newProxy(t, srv.Addr),
		topic:    fmt.Sprintf("projects/%s/topics/t%d", testProject, n),
		sub:      fmt.Sprintf("sub-%d", n),
		deadline: time.Duration(secs) * time.Second,
	}
	ctx := context.Background()
	if _, err := srv.GServer.CreateTopic(ctx, &pubsubpb.Topic{Name: f.topic}); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	if _, err := srv.GServer.CreateSubscription(ctx, &pubsubpb.Subscription{
		Name:                  "projects/" + testProject + "/subscriptions/" + f.sub,
		Topic:                 f.topic,
		AckDeadlineSeconds:    secs,
		EnableMessageOrdering: ordered,
	}); err != nil {
		t.Fatalf("create subscription: %v", err)
	}
	return f
}

func (queueHarness) NewQueue(t *testing.T, opts brokertest.QueueOptions) brokertest.QueueFixture {
	return newFixture(t, opts.AckDeadline, false)
}

func (f *queueFixture) config() Config {
	return Config{Project: testProject, Subscription: f.sub, Endpoint: f.px.Addr(), Insecure: true}
}

func (f *queueFixture) open(t *testing.T, cfg Config) *Queue {
	t.Helper()
	q, err := NewQueue(context.Background(), cfg)
	if err != nil {
		t.Fatalf("NewQueue: %v", err)
	}
	t.Cleanup(func() { _ = q.Close() })
	return q
}

func (f *queueFixture) Open(t *testing.T) brokers.Queue { return f.open(t, f.config()) }

// Send publishes msgs in process (the key as the "key" attribute).
func (f *queueFixture) Send(ctx context.Context, msgs ...brokers.Message) error {
	for _, m := range msgs {
		f.srv.Publish(f.topic, m.Value, attrs(m))
	}
	return ctx.Err()
}

func attrs(m brokers.Message) map[string]string {
	a := map[string]string{}
	for _, h := range m.Headers {
		a[h.Key] = string(h.Value)
	}
	if m.Key != nil {
		a[DefaultKeyAttribute] = string(m.Key)
	}
	return a
}

func (f *queueFixture) AckDeadline() time.Duration { return f.deadline }

func (f *queueFixture) StopServer(t *testing.T) { f.px.Stop() }

func (f *queueFixture) StartServer(t *testing.T) {
	t.Helper()
	if err := f.px.Start(); err != nil {
		t.Fatal(err)
	}
}

func (f *queueFixture) CutConnections(t *testing.T) {
	t.Helper()
	if f.px.Cut() == 0 {
		t.Fatal("cut connections: none to cut")
	}
}
