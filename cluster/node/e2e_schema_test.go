package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/actors/decode"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/kafka"
	"github.com/drover-dev/drover/cluster/config"
	"github.com/drover-dev/drover/cluster/node"
	"github.com/drover-dev/drover/internal/srtest"
	"github.com/drover-dev/drover/internal/syncbuf"
	"github.com/drover-dev/drover/internal/testserver"
	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/persistence/stores"
	"github.com/drover-dev/drover/testkit"
)

const (
	avroOrderV1 = `{"type":"record","name":"Order","namespace":"shop","fields":[
 {"name":"id","type":"long"},{"name":"name","type":"string"},
 {"name":"price","type":{"type":"bytes","logicalType":"decimal","precision":12,"scale":2}},
 {"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}}]}`
	avroOrderV2 = `{"type":"record","name":"Order","namespace":"shop","fields":[
 {"name":"id","type":"long"},{"name":"name","type":"string"},
 {"name":"price","type":{"type":"bytes","logicalType":"decimal","precision":12,"scale":2}},
 {"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"qty","type":"int","default":0},{"name":"note","type":["null","string"],"default":null}]}`
	avroDebezium = `{"type":"record","name":"Envelope","namespace":"pg.public.customers","fields":[
 {"name":"before","type":["null",{"type":"record","name":"Value","fields":[{"name":"id","type":"long"},{"name":"email","type":"string"}]}],"default":null},
 {"name":"after","type":["null","Value"],"default":null},
 {"name":"op","type":"string"},{"name":"ts_ms","type":["null","long"],"default":null}]}`
	e2eSRParts = 4
	e2eSRTopic = "orders-avro"
	e2eSREnv   = "DROVER_E2E_SR_PASSWORD"
)

// srOrder and srCustomer are what the workload's messages carry; each
// codec writes them in its format, as a producer does (franz-go's
// sr.Serde frames them).
type (
	srOrder struct {
		id, cents int64
		name      string
		at        time.Time
		qty       int32 // v2 only
		note      string
	}
	srCustomer struct {
		id    int64
		email string
	}
)

// srCodec is one format's producer.
type srCodec interface {
	format() string
	// setup registers the order (v1) and change-event schemas; v2 is
	// the id of the order schema's next version, which the producer
	// writes before the registry knows it (the test registers it once the
	// registry is back from its outage).
	setup(t *testing.T, reg *srtest.Registry) (v2 int, schema srtest.Schema)
	order(o srOrder, v2 bool) []byte
	change(op string, before, after *srCustomer, ts int64) []byte
	corrupt() []byte // a known id, a body that does not match its schema
}

func serdeEncode(t testing.TB, s *sr.Serde, v any) []byte {
	t.Helper()
	b, err := s.Encode(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// avroCodec: hamba/avro through sr.Serde.
type avroCodec struct {
	t     testing.TB
	serde sr.Serde
}

type (
	orderV1 map[string]any
	orderV2 map[string]any
	cdc     map[string]any
)

func (c *avroCodec) format() string { return "avro" }

func (c *avroCodec) setup(t *testing.T, reg *srtest.Registry) (int, srtest.Schema) {
	c.t = t
	v1 := reg.Add("orders-value", srtest.Schema{Schema: avroOrderV1})
	dbz := reg.Add("cdc-value", srtest.Schema{Schema: avroDebezium})
	v2 := v1 + 100
	add := func(id int, v any, schema string) {
		s := avro.MustParse(schema)
		c.serde.Register(id, v, sr.EncodeFn(func(v any) ([]byte, error) { return avro.Marshal(s, v) }))
	}
	add(v1, orderV1{}, avroOrderV1)
	add(v2, orderV2{}, avroOrderV2)
	add(dbz, cdc{}, avroDebezium)
	return v2, srtest.Schema{Schema: avroOrderV2}
}

func (c *avroCodec) order(o srOrder, v2 bool) []byte {
	m := map[string]any{"id": o.id, "name": o.name, "price": big.NewRat(o.cents, 100), "at": o.at}
	if !v2 {
		return serdeEncode(c.t, &c.serde, orderV1(m))
	}
	m["qty"], m["note"] = o.qty, map[string]any{"string": o.note}
	return serdeEncode(c.t, &c.serde, orderV2(m))
}

func (c *avroCodec) change(op string, before, after *srCustomer, ts int64) []byte {
	row := func(r *srCustomer) any {
		if r == nil {
			return nil
		}
		return map[string]any{"pg.public.customers.Value": map[string]any{"id": r.id, "email": r.email}}
	}
	return serdeEncode(c.t, &c.serde, cdc{"op": op, "before": row(before), "after": row(after), "ts_ms": map[string]any{"long": ts}})
}

func (c *avroCodec) corrupt() []byte {
	good := c.order(srOrder{id: 2, name: "a longer name", cents: 100, at: time.Unix(0, 0)}, false)
	return good[:len(good)-6] // cut inside the name
}

// srWorkload is n messages: orders (half of them v2 when withV2),
// Debezium creates, updates and deletes, tombstones, and bad ones (an
// unknown schema id, a corrupt body, a JSON body without the magic byte).
func srWorkload(c srCodec, rng *rand.Rand, n int, withV2 bool) []brokers.Message {
	var out []brokers.Message
	at := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	for i := range n {
		var m brokers.Message
		switch r := rng.IntN(100); {
		case r < 45:
			id := rng.Int64N(300)
			o := srOrder{id: id, name: fmt.Sprintf("order %d/%d", id, i), cents: rng.Int64N(1e6) - 5e5,
				at: at.Add(time.Duration(i) * time.Millisecond), qty: int32(rng.IntN(9)), note: "n" + strconv.Itoa(i)}
			m = brokers.Message{Key: []byte(strconv.FormatInt(id, 10)), Value: c.order(o, withV2 && rng.IntN(2) == 0)}
		case r < 75:
			id := 10000 + rng.Int64N(60)
			row := &srCustomer{id: id, email: fmt.Sprintf("c%d-%d@x", id, i)}
			var v []byte
			switch rng.IntN(3) {
			case 0:
				v = c.change("c", nil, row, int64(i))
			case 1:
				v = c.change("u", row, row, int64(i))
			default:
				v = c.change("d", row, nil, int64(i))
			}
			m = brokers.Message{Key: []byte(strconv.FormatInt(id, 10)), Value: v}
		case r < 85:
			id := rng.Int64N(300)
			if rng.IntN(2) == 0 {
				id = 10000 + rng.Int64N(60)
			}
			m = brokers.Message{Key: []byte(strconv.FormatInt(id, 10)), Tombstone: true}
		case r < 90:
			good := c.order(srOrder{id: 1, name: "x", at: at}, false)
			m = brokers.Message{Key: []byte("1"), Value: append([]byte{0, 0, 0, 0, 99}, good[5:]...)}
		case r < 95:
			m = brokers.Message{Key: []byte("2"), Value: c.corrupt()}
		default:
			m = brokers.Message{Key: []byte("3"), Value: []byte(`{"id":3}`)}
		}
		out = append(out, m)
	}
	return out
}

func produceSR(t *testing.T, cl *kgo.Client, msgs []brokers.Message) []e2eMsg {
	t.Helper()
	recs := make([]*kgo.Record, len(msgs))
	for i, m := range msgs {
		p, _ := strconv.Atoi(testkit.PartitionOf(m, e2eSRParts))
		recs[i] = &kgo.Record{Key: m.Key, Value: m.Value, Partition: int32(p)}
	}
	return e2eProduceSync(t, cl, recs, msgs)
}

// Each wire format end to end: a kafka source with decode.format through YAML
// and node.Start, its schemas in the in-process registry (basic auth, the
// password from ${env:}). Orders, Debezium change events, tombstones and
// bad messages; then the registry goes down while messages of a new
// schema id arrive: the units show retrying with the registry's error,
// nothing is dead-lettered for it, and everything applies once it is back.
// The table and the dead letters are what decoding the messages gives.
func TestE2ESchemaRegistry(t *testing.T) {
	for _, c := range []srCodec{&avroCodec{}, &protoCodec{}, &jsonSchemaCodec{}} {
		t.Run(c.format(), func(t *testing.T) { e2eSchemaRegistry(t, c) })
	}
}

func e2eSchemaRegistry(t *testing.T, codec srCodec) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(e2eSRParts, e2eSRTopic))
	if err != nil {
		testserver.SkipOrFail(t, "kfake did not start: "+err.Error())
	}
	t.Cleanup(c.Close)
	addr := c.ListenAddrs()[0]
	const password = "sr-pw-0d1e2f3a4b5c"
	t.Setenv(e2eSREnv, password)
	reg := srtest.New(t, "drover", password)
	v2, v2Schema := codec.setup(t, reg)
	rng := rand.New(rand.NewPCG(14, 1))

	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(e2eSRTopic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	storeURL := e2eSQLiteURL(t)
	yaml := fmt.Sprintf(`node: {name: sr-1, debug_addr: 127.0.0.1:0}
cluster: {bind: 127.0.0.1:0}
store: {url: %q}
sources:
  - name: orders_avro
    type: kafka
    records: {table: orders_avro, key: id}
    batch_size: 200
    max_wait: 100ms
    max_consecutive_failures: 1000
    decode:
      format: %s
      registry: {url: %q, username: drover, password: "${env:%s}"}
    kafka: {brokers: [%q], topic: %s}
`, storeURL, codec.format(), reg.URL(), e2eSREnv, addr, e2eSRTopic)
	cfg, err := config.Parse([]byte(yaml), config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(cfg.String(), password) || strings.Contains(fmt.Sprintf("%v %+v", cfg, cfg.Sources[0].Decoding), password) {
		t.Fatal("the printed config shows the registry password")
	}
	logs := &syncbuf.Buffer{}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	n, err := node.Start(ctx, cfg, node.Options{Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	st, err := stores.Open(ctx, storeURL, stores.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	src := &e2eSource{Name: "orders_avro", Table: "orders_avro"}
	allApplied := func() error {
		return e2eWaitFor(ctx, 50*time.Millisecond, 60*time.Second, func() (bool, string) {
			ok, why, err := e2eDone(ctx, st, nil, []*e2eSource{src})
			if err != nil {
				return false, err.Error()
			}
			return ok, why
		})
	}

	// Phase 1: the registry is up.
	src.Sent = produceSR(t, cl, srWorkload(codec, rng, 2500, false))
	if err := allApplied(); err != nil {
		t.Fatalf("phase 1: %v", err)
	}
	dead1, err := st.DeadLetters(ctx, persistence.DeadLetterFilter{Source: src.Name})
	if err != nil {
		t.Fatal(err)
	}

	// Phase 2: the registry is down while a new schema id arrives.
	reg.SetDown(true)
	src.Sent = append(src.Sent, produceSR(t, cl, srWorkload(codec, rng, 2500, true))...)
	var tree []byte
	if err := e2eWaitFor(ctx, 20*time.Millisecond, 60*time.Second, func() (bool, string) {
		for _, s := range n.Tree().Sources {
			for _, u := range s.Units {
				if u.State == actors.StateRetrying && strings.Contains(u.LastError, "schema registry") {
					tree, _ = json.Marshal(n.Tree())
					return true, ""
				}
			}
		}
		return false, "no unit retrying with the registry's error"
	}); err != nil {
		t.Fatalf("registry down: %v", err)
	}
	if reg.Refused() == 0 {
		t.Fatal("the registry refused nothing while down")
	}
	dead2, err := st.DeadLetters(ctx, persistence.DeadLetterFilter{Source: src.Name})
	if err != nil {
		t.Fatal(err)
	}
	reg.SetDown(false)
	// the new schema, registered under the id the producer used
	reg.AddID("orders-value", v2, v2Schema)
	if err := allApplied(); err != nil {
		t.Fatalf("after the registry came back: %v", err)
	}
	for id := 1; id <= 2; id++ { // the schemas of phase 1: fetched once, before the outage
		if n := reg.Requests(id); n != 1 {
			t.Errorf("schema id %d was asked for %d times, want once", id, n)
		}
	}
	// Only the messages read before the registry went down (and decoded)
	// can be dead letters by then: none of phase 2 was dead-lettered for
	// the outage. The check of all of them is e2eCheckRecords below.
	phase1 := map[string]bool{}
	for _, m := range src.Sent[:2500] {
		phase1[e2eStoreKey(src, src.Name+"/"+m.Part, m.Msg.Position)] = true
	}
	for _, dl := range dead2 {
		if !phase1[e2eStoreKey(src, dl.Unit, dl.Position)] && strings.Contains(dl.Reason, "schema id "+strconv.Itoa(v2)) {
			t.Errorf("dead-lettered during the outage: %s/%s %s", dl.Unit, dl.Position, dl.Reason)
		}
	}
	t.Logf("dead letters: %d after phase 1, %d during the outage", len(dead1), len(dead2))

	// The expectation: decoding every message with the registry up.
	rsrc, err := kafka.NewSchemaRegistry(kafka.RegistryConfig{URL: reg.URL(), Username: "drover", Password: password})
	if err != nil {
		t.Fatal(err)
	}
	r := decode.NewRegistryFrom(reg.URL(), rsrc, 0)
	dc := decode.Config{KeyField: "id", MaxBytes: config.DefaultMaxMessageBytes, Format: decode.Format(codec.format()), Registry: r}
	var msgs []brokers.Message
	for _, m := range src.Sent {
		msgs = append(msgs, m.Msg)
	}
	if err := dc.Resolve(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	// the expectation is no degenerate one: orders and Debezium rows in
	// the table, every kind of bad message among the dead letters
	want, wantDead := e2eExpectWith(t, src, dc)
	cdcRows := 0
	for k := range want {
		if len(k) == 5 && k[0] == '1' {
			cdcRows++
		}
	}
	kinds := map[string]int{}
	for _, r := range wantDead {
		for _, k := range []string{"schema id 99: not found in the registry", "the body does not match the schema", "wire format: magic byte 0x7b"} {
			if strings.Contains(r, k) {
				kinds[k]++
			}
		}
	}
	if cdcRows == 0 || len(want)-cdcRows == 0 || len(kinds) != 3 {
		t.Fatalf("degenerate expectation: %d Debezium rows, %d orders, dead letters by kind %v", cdcRows, len(want)-cdcRows, kinds)
	}
	e2eCheckRecordsWith(ctx, t, st, src, dc)
	for what, text := range map[string]string{"logs": logs.String(), "tree": string(tree)} {
		if strings.Contains(text, password) {
			t.Errorf("the registry password shows in the %s", what)
		}
	}
}
