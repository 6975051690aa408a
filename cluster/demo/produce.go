package demo

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/internal/workload"
)

// Producer writes the demo workload to the topic and remembers every
// record's partition and offset, for the verifier.
type Producer struct {
	client *kgo.Client
	queues *queueProducer
	avro   *avroProducer
	wl     *workload.Workload
	mu     sync.Mutex
	sent   map[int32][]Sent // partition -> records in offset order
	total  int
}

// Sent is one produced record.
type Sent struct {
	Offset int64
	Msg    brokers.Message
}

// NewProducer connects to the cluster's Kafka. The workload is seeded, so
// the same seed produces the same messages (their partitions follow their
// keys; unkeyed ones go anywhere).
func (c *Cluster) NewProducer(seed uint64) (*Producer, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddr()), kgo.DefaultProduceTopic(Topic),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return nil, fmt.Errorf("demo: producer: %w", err)
	}
	wl := workload.New(seed)
	wl.Keys = 2000
	wl.MaxBytes = MaxMessageBytes
	ap, err := newAvroProducer(c.avroSchemaID, seed+2)
	if err != nil {
		cl.Close()
		return nil, err
	}
	return &Producer{client: cl, wl: wl, sent: map[int32][]Sent{}, queues: newQueueProducer(c.q, seed+1), avro: ap}, nil
}

// Produce sends n messages and waits for them to be acknowledged.
func (p *Producer) Produce(ctx context.Context, n int) error {
	recs := make([]*kgo.Record, n)
	msgs := make(map[*kgo.Record]brokers.Message, n)
	for i := range recs {
		m, _ := p.wl.Next()
		r := &kgo.Record{Key: m.Key, Value: m.Value}
		if m.Tombstone {
			r.Value = nil
		}
		recs[i] = r
		msgs[r] = m
	}
	// results come in the order the brokers answered, not the order given
	res := p.client.ProduceSync(ctx, recs...)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range res {
		if r.Err != nil {
			return fmt.Errorf("demo: produce: %w", r.Err)
		}
		p.sent[r.Record.Partition] = append(p.sent[r.Record.Partition], Sent{Offset: r.Record.Offset, Msg: msgs[r.Record]})
		p.total++
	}
	for part, ss := range p.sent {
		slices.SortFunc(ss, func(a, b Sent) int { return cmp.Compare(a.Offset, b.Offset) })
		p.sent[part] = ss
	}
	return nil
}

// QueueShare: one message goes to the queues (NATS and Pub/Sub, the same
// to both), and one Avro order to orders_avro, for every QueueShare to
// the orders topic.
const QueueShare = 4

// Run produces at rate messages per second to the orders topic (and
// rate/QueueShare to each queue and to orders_avro) until ctx ends.
func (p *Producer) Run(ctx context.Context, rate int) error {
	if rate <= 0 {
		return nil
	}
	const tick = 50 * time.Millisecond
	t := time.NewTicker(tick)
	defer t.Stop()
	start, done := time.Now(), 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-t.C:
			want := int(now.Sub(start).Seconds() * float64(rate))
			if want > done {
				// A send is never cancelled half-way: a message the broker
				// took must be recorded, or the verifier would find it
				// applied but never produced. ctx stops the loop between
				// sends.
				sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				err := p.Produce(sctx, want-done)
				if err == nil && want/QueueShare > done/QueueShare {
					err = p.queues.produce(sctx, want/QueueShare-done/QueueShare)
					if err == nil {
						err = p.avro.produce(sctx, p.client, want/QueueShare-done/QueueShare)
					}
				}
				cancel()
				if err != nil {
					return err
				}
				done = want
			}
		}
	}
}

// Total is how many messages were produced, to Kafka and the queues.
func (p *Producer) Total() int {
	p.mu.Lock()
	n := p.total
	p.mu.Unlock()
	n += p.avro.count()
	for _, q := range p.queues.snapshot() {
		n += len(q)
	}
	return n
}

// QueueSent returns what was published to the queues, by source ("jobs"
// for NATS, "events" for Pub/Sub).
func (p *Producer) QueueSent() map[string][]QueueSent { return p.queues.snapshot() }

// Produced is everything a Producer wrote.
type Produced struct {
	Kafka  map[int32][]Sent       // the orders topic, by partition, in offset order
	Queues map[string][]QueueSent // by records source: "jobs" (NATS), "events" (Pub/Sub)
	Avro   map[int32][]AvroSent   // orders_avro, by partition, in offset order
}

// Produced returns a copy of what was produced.
func (p *Producer) Produced() Produced {
	return Produced{Kafka: p.Sent(), Queues: p.QueueSent(), Avro: p.avro.snapshot()}
}

// Sent returns a copy of what was produced to Kafka, by partition.
func (p *Producer) Sent() map[int32][]Sent {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[int32][]Sent, len(p.sent))
	for k, v := range p.sent {
		out[k] = append([]Sent(nil), v...)
	}
	return out
}

// Close disconnects.
func (p *Producer) Close() { p.client.Close() }
