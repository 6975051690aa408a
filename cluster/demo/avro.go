package demo

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/drover-dev/drover/internal/srtest"
	"github.com/drover-dev/drover/persistence"
)

// The demo's Avro source: orders in Avro, in the Confluent wire format
// (magic byte, schema id, body) framed by franz-go's sr.Serde, on a topic
// of their own; the demo runs the schema registry they name (internal/srtest,
// in process). The source orders_avro decodes them through it
// (decode.format avro) into the table orders_avro.
const (
	AvroTopic      = "orders_avro"
	AvroPartitions = 4
	avroSubject    = AvroTopic + "-value"
	avroKeys       = 500
)

// avroOrderSchema is the registered schema: the fields of the JSON orders'
// typed columns.
const avroOrderSchema = `{"type": "record", "name": "Order", "namespace": "demo", "fields": [
  {"name": "id", "type": "long"},
  {"name": "name", "type": "string"},
  {"name": "seq", "type": "long"},
  {"name": "price", "type": "double"},
  {"name": "ok", "type": "boolean"}]}`

// avroOrder is one order as the producer encodes it and the verifier
// expects it back (as JSON, fields as the schema names them).
type avroOrder struct {
	ID    int64   `avro:"id" json:"id"`
	Name  string  `avro:"name" json:"name"`
	Seq   int64   `avro:"seq" json:"seq"`
	Price float64 `avro:"price" json:"price"`
	OK    bool    `avro:"ok" json:"ok"`
}

// AvroSent is one produced Avro record: its offset and key, and the JSON
// document the orders_avro table must hold for the key after it ("": a
// tombstone, which deletes the key).
type AvroSent struct {
	Offset int64
	Key    string
	Doc    string
}

// startRegistry starts the in-process schema registry on port (0: a free
// one) and registers the order schema.
func startRegistry(port int) (*srtest.Registry, int, error) {
	reg, err := srtest.Start("127.0.0.1:"+strconv.Itoa(port), "", "")
	if err != nil {
		return nil, 0, fmt.Errorf("demo: %w", err)
	}
	return reg, reg.Add(avroSubject, srtest.Schema{Schema: avroOrderSchema}), nil
}

// RegistryURL is the in-process schema registry's base URL.
func (c *Cluster) RegistryURL() string { return c.reg.URL() }

// avroConfig is the orders_avro source's entry in a node config.
func (c *Cluster) avroConfig() string {
	return fmt.Sprintf(`  - name: %s
    type: kafka
    kafka:
      brokers: [%q]
      topic: %s
    decode:
      format: avro
      registry: {url: %q}
    records: {table: %s, key: id}
    max_message_bytes: %d
    batch_size: %d
    max_wait: %s
    lease_ttl: 10s
    discovery_interval: 5s
`, AvroTopic, c.KafkaAddr(), AvroTopic, c.RegistryURL(), AvroTopic, MaxMessageBytes, c.cfg.BatchSize, c.cfg.MaxWait)
}

// avroProducer writes Avro orders: upserts of avroKeys keys, every tenth
// message a tombstone of one, drawn from a seed.
type avroProducer struct {
	serde sr.Serde
	rng   *rand.Rand
	seq   int64
	mu    sync.Mutex
	sent  map[int32][]AvroSent
	total int
}

func newAvroProducer(schemaID int, seed uint64) (*avroProducer, error) {
	s, err := avro.Parse(avroOrderSchema)
	if err != nil {
		return nil, fmt.Errorf("demo: avro schema: %w", err)
	}
	p := &avroProducer{rng: rand.New(rand.NewPCG(seed, 0xa5)), sent: map[int32][]AvroSent{}}
	p.serde.Register(schemaID, avroOrder{}, sr.EncodeFn(func(v any) ([]byte, error) { return avro.Marshal(s, v) }))
	return p, nil
}

// produce sends n Avro orders through client and waits for them.
func (p *avroProducer) produce(ctx context.Context, client *kgo.Client, n int) error {
	recs := make([]*kgo.Record, n)
	docs := make(map[*kgo.Record]string, n)
	for i := range recs {
		p.seq++
		id := p.rng.Int64N(avroKeys) + 1
		r := &kgo.Record{Topic: AvroTopic, Key: []byte(strconv.FormatInt(id, 10))}
		if p.rng.IntN(10) != 0 {
			o := avroOrder{ID: id, Name: fmt.Sprintf("order %d", id), Seq: p.seq,
				Price: float64(p.rng.IntN(40000)) / 4, OK: p.rng.IntN(2) == 0} // quarters: exact in binary
			b, err := p.serde.Encode(o)
			if err != nil {
				return fmt.Errorf("demo: avro encode: %w", err)
			}
			doc, _ := json.Marshal(o)
			r.Value, docs[r] = b, string(doc)
		}
		recs[i] = r
	}
	res := client.ProduceSync(ctx, recs...)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range res {
		if r.Err != nil {
			return fmt.Errorf("demo: produce to %s: %w", AvroTopic, r.Err)
		}
		p.sent[r.Record.Partition] = append(p.sent[r.Record.Partition],
			AvroSent{Offset: r.Record.Offset, Key: string(r.Record.Key), Doc: docs[r.Record]})
		p.total++
	}
	return nil
}

func (p *avroProducer) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.total
}

func (p *avroProducer) snapshot() map[int32][]AvroSent {
	p.mu.Lock()
	defer p.mu.Unlock()
	// in offset order (a produce call's answers may come in any order),
	// sorted here once rather than on every produce
	out := make(map[int32][]AvroSent, len(p.sent))
	for k, v := range p.sent {
		out[k] = slices.SortedFunc(slices.Values(v), func(a, b AvroSent) int { return cmp.Compare(a.Offset, b.Offset) })
	}
	return out
}

// expectAvro is what the orders_avro table must hold after sent: per key
// the document of its last record, keys whose last record is a tombstone
// absent. A key stays on one partition, so the order between partitions
// does not matter.
func expectAvro(sent map[int32][]AvroSent) map[string]string {
	want := map[string]string{}
	for _, recs := range sent {
		for _, r := range recs {
			if r.Doc == "" {
				delete(want, r.Key)
			} else {
				want[r.Key] = r.Doc
			}
		}
	}
	return want
}

// verifyAvro checks the orders_avro table against what was produced; it
// has no dead letters (every record decodes).
func (v *Verdict) verifyAvro(ctx context.Context, s contents, sent map[int32][]AvroSent) error {
	for _, recs := range sent {
		v.Produced += len(recs)
	}
	return v.compare(ctx, s, AvroTopic, expectAvro(sent), map[string]string{},
		func(dl persistence.DeadLetter) string { return dl.Unit + "@" + dl.Position })
}

// lastOffsets is the last produced offset of each partition of sent (each
// partition's records in offset order), the orders' or the Avro orders'.
func lastOffsets[R any](sent map[int32][]R, offset func(R) int64) map[int32]int64 {
	out := map[int32]int64{}
	for p, recs := range sent {
		if len(recs) > 0 {
			out[p] = offset(recs[len(recs)-1])
		}
	}
	return out
}
