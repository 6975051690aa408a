package demo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	natsserver "github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/internal/workload"
)

// The demo's queues: a NATS JetStream stream read by two durable pull
// consumers, and a Pub/Sub topic with two subscriptions. Each has a
// records-mode source and an audit source, as the Kafka topic does.
const (
	natsStream    = "JOBS"
	natsSubject   = "jobs.new"
	pubsubProject = "demo"
	pubsubTopic   = "events"
)

// queueSources are the demo's queue sources and their slots.
var queueSources = []struct {
	name  string
	slots int
}{{"jobs", 3}, {"jobs_audit", 2}, {"events", 2}, {"events_audit", 1}}

// queues holds the embedded NATS and Pub/Sub servers.
type queues struct {
	nats   *natsserver.Server
	nc     *natsgo.Conn
	js     jetstream.JetStream
	pubsub *pstest.Server
	// natsCreated is the JetStream stream's creation time, part of its
	// queue message ids.
	natsCreated int64
}

func startQueues(dir string, natsPort, pubsubPort int) (*queues, error) {
	q := &queues{}
	port := natsPort
	if port == 0 {
		port = -1
	}
	storeDir := filepath.Join(dir, "nats")
	_ = os.RemoveAll(storeDir)
	s, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: storeDir, NoLog: true, NoSigs: true})
	if err != nil {
		return nil, fmt.Errorf("demo: NATS server: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("demo: NATS server not ready in 10 s")
	}
	q.nats = s
	if q.nc, err = natsgo.Connect(s.ClientURL()); err != nil {
		q.close()
		return nil, fmt.Errorf("demo: connect to NATS: %w", err)
	}
	if q.js, err = jetstream.New(q.nc); err != nil {
		q.close()
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := q.js.CreateStream(ctx, jetstream.StreamConfig{Name: natsStream, Subjects: []string{"jobs.>"}})
	if err != nil {
		q.close()
		return nil, fmt.Errorf("demo: create NATS stream: %w", err)
	}
	q.natsCreated = st.CachedInfo().Created.UnixNano()
	if pubsubPort > 0 {
		q.pubsub = pstest.NewServerWithPort(pubsubPort)
	} else {
		q.pubsub = pstest.NewServer()
	}
	topic := "projects/" + pubsubProject + "/topics/" + pubsubTopic
	if _, err := q.pubsub.GServer.CreateTopic(ctx, &pubsubpb.Topic{Name: topic}); err != nil {
		q.close()
		return nil, fmt.Errorf("demo: create Pub/Sub topic: %w", err)
	}
	for _, sub := range []string{"events", "events_audit"} {
		if _, err := q.pubsub.GServer.CreateSubscription(ctx, &pubsubpb.Subscription{
			Name: "projects/" + pubsubProject + "/subscriptions/" + sub, Topic: topic, AckDeadlineSeconds: 10, // the minimum: a dead slot's messages come back soon
		}); err != nil {
			q.close()
			return nil, fmt.Errorf("demo: create Pub/Sub subscription: %w", err)
		}
	}
	return q, nil
}

func (q *queues) natsURL() string    { return q.nats.ClientURL() }
func (q *queues) pubsubAddr() string { return q.pubsub.Addr }

func (q *queues) close() {
	if q.nc != nil {
		q.nc.Close()
	}
	if q.nats != nil {
		q.nats.Shutdown()
		q.nats.WaitForShutdown()
	}
	if q.pubsub != nil {
		_ = q.pubsub.Close()
	}
}

func (c *Cluster) queueConfig() string {
	return fmt.Sprintf(`  - name: jobs
    type: nats
    nats: {url: %q, stream: %s, mode: queue, consumer: drover-jobs, ack_wait: 5s}
    slots: 3
    records: {table: jobs, key: id}
    max_message_bytes: %d
    batch_size: %d
    max_wait: %s
  - name: jobs_audit
    type: nats
    mode: handler
    handler_name: audit
    nats: {url: %q, stream: %s, mode: queue, consumer: drover-jobs-audit, ack_wait: 5s}
    slots: 2
    batch_size: %d
    max_wait: %s
  - name: events
    type: pubsub
    pubsub: {project: %s, subscription: events, endpoint: %q}
    slots: 2
    records: {table: events, key: id}
    max_message_bytes: %d
    batch_size: %d
    max_wait: %s
  - name: events_audit
    type: pubsub
    mode: handler
    handler_name: audit
    pubsub: {project: %s, subscription: events_audit, endpoint: %q}
    batch_size: %d
    max_wait: %s
`, c.q.natsURL(), natsStream, MaxMessageBytes, c.cfg.BatchSize, c.cfg.MaxWait,
		c.q.natsURL(), natsStream, c.cfg.BatchSize, c.cfg.MaxWait,
		pubsubProject, c.q.pubsubAddr(), MaxMessageBytes, c.cfg.BatchSize, c.cfg.MaxWait,
		pubsubProject, c.q.pubsubAddr(), c.cfg.BatchSize, c.cfg.MaxWait)
}

// queueProducer publishes the queue workload: distinct keys (queues have
// no order between slots, so a key must not be written twice), no
// tombstones.
type queueProducer struct {
	q    *queues
	wl   *workload.Workload
	mu   sync.Mutex
	sent map[string][]QueueSent // source ("jobs", "events") -> messages
}

// QueueSent is one message published to a queue, with the id the broker
// gave it (the dedupe id drover stores).
type QueueSent struct {
	ID  string
	Msg brokers.Message
}

func newQueueProducer(q *queues, seed uint64) *queueProducer {
	wl := workload.New(seed)
	wl.Keys, wl.Tombstones, wl.MaxBytes = 1<<30, false, MaxMessageBytes
	return &queueProducer{q: q, wl: wl, sent: map[string][]QueueSent{}}
}

func (p *queueProducer) produce(ctx context.Context, n int) error {
	for i := 0; i < n; i++ {
		m, _ := p.wl.Next()
		hdr := natsgo.Header{}
		attrs := map[string]string{}
		if m.Key != nil {
			hdr.Set("key", string(m.Key))
			attrs["key"] = string(m.Key)
		}
		ack, err := p.q.js.PublishMsg(ctx, &natsgo.Msg{Subject: natsSubject, Data: m.Value, Header: hdr})
		if err != nil {
			return fmt.Errorf("demo: publish to NATS: %w", err)
		}
		id := p.q.pubsub.Publish("projects/"+pubsubProject+"/topics/"+pubsubTopic, m.Value, attrs)
		p.mu.Lock()
		p.sent["jobs"] = append(p.sent["jobs"], QueueSent{ID: fmt.Sprintf("%s:%d:%d", ack.Stream, p.q.natsCreated, ack.Sequence), Msg: m})
		p.sent["events"] = append(p.sent["events"], QueueSent{ID: id, Msg: m})
		p.mu.Unlock()
	}
	return nil
}

func (p *queueProducer) snapshot() map[string][]QueueSent {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string][]QueueSent{}
	for k, v := range p.sent {
		out[k] = append([]QueueSent(nil), v...)
	}
	return out
}
