package decode

import (
	"math/big"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/drover-dev/drover/internal/srtest"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/persistence"
)

// event is a typical 300-byte order event.
const event = `{"id":"ord-000123456","customer":{"id":"c-98765","name":"Ada Lovelace","tier":"gold"},` +
	`"status":"paid","total":1234.56,"currency":"EUR","items":[{"sku":"A-1","qty":2,"price":99.5},` +
	`{"sku":"B-22","qty":1,"price":1035.56}],"created_at":"2026-11-29T10:11:12Z","tags":["web","promo"],"version":7}`

func BenchmarkRecord(b *testing.B) {
	cfg := Config{KeyField: "id"}
	m := brokers.Message{Position: "42", Key: []byte("ord-000123456"), Value: []byte(event)}
	b.SetBytes(int64(len(event)))
	b.ReportAllocs()
	for b.Loop() {
		if op := cfg.Record(m); op.Kind != persistence.OpUpsert {
			b.Fatalf("kind %v: %s", op.Kind, op.Reason)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
}

// benchWire runs Record on one wire-format message of a registry schema.
func benchWire(b *testing.B, cfg Config, value []byte) {
	m := brokers.Message{Position: "42", Key: []byte("ord-000123456"), Value: value}
	if err := cfg.Resolve(b.Context(), []brokers.Message{m}); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(value)))
	b.ReportAllocs()
	for b.Loop() {
		if op := cfg.Record(m); op.Kind != persistence.OpUpsert {
			b.Fatalf("kind %v: %s", op.Kind, op.Reason)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
}

const benchAvroSchema = `{"type":"record","name":"Order","fields":[
 {"name":"id","type":"string"},
 {"name":"customer","type":{"type":"record","name":"Customer","fields":[{"name":"id","type":"string"},{"name":"name","type":"string"},{"name":"tier","type":"string"}]}},
 {"name":"status","type":"string"},{"name":"total","type":{"type":"bytes","logicalType":"decimal","precision":12,"scale":2}},
 {"name":"currency","type":"string"},
 {"name":"items","type":{"type":"array","items":{"type":"record","name":"Item","fields":[{"name":"sku","type":"string"},{"name":"qty","type":"int"},{"name":"price","type":"double"}]}}},
 {"name":"created_at","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"tags","type":{"type":"array","items":"string"}},{"name":"version","type":"int"}]}`

func BenchmarkRecordAvro(b *testing.B) {
	reg := srtest.New(b, "", "")
	id := reg.Add("orders-value", srtest.Schema{Schema: benchAvroSchema})
	v := map[string]any{"id": "ord-000123456", "customer": map[string]any{"id": "c-98765", "name": "Ada Lovelace", "tier": "gold"},
		"status": "paid", "total": big.NewRat(123456, 100), "currency": "EUR",
		"items":      []any{map[string]any{"sku": "A-1", "qty": 2, "price": 99.5}, map[string]any{"sku": "B-22", "qty": 1, "price": 1035.56}},
		"created_at": time.Date(2026, 11, 29, 10, 11, 12, 0, time.UTC), "tags": []any{"web", "promo"}, "version": 7}
	benchWire(b, Config{KeyField: "id", Format: FormatAvro, Registry: newRegistry(b, reg.URL())}, serdeEncode(b, id, benchAvroSchema, v))
}

func BenchmarkRecordJSONSchema(b *testing.B) {
	reg := srtest.New(b, "", "")
	id := reg.Add("orders-value", srtest.Schema{Type: "JSON", Schema: `{"type":"object","required":["id","status"],
 "properties":{"id":{"type":"string"},"status":{"type":"string"},"total":{"type":"number"},"items":{"type":"array"}}}`})
	benchWire(b, Config{KeyField: "id", Format: FormatJSONSchema, Registry: newRegistry(b, reg.URL())}, append([]byte{0, 0, 0, 0, byte(id)}, event...))
}

func BenchmarkRecordProtobuf(b *testing.B) {
	reg := srtest.New(b, "", "")
	id := reg.Add("orders-value", srtest.Schema{Type: "PROTOBUF", Schema: `syntax = "proto3";
message Order { string id = 1; Customer customer = 2; string status = 3; double total = 4; string currency = 5;
  repeated Item items = 6; string created_at = 7; repeated string tags = 8; int32 version = 9; }
message Customer { string id = 1; string name = 2; string tier = 3; }
message Item { string sku = 1; int32 qty = 2; double price = 3; }`})
	cfg := Config{KeyField: "id", Format: FormatProtobuf, Registry: newRegistry(b, reg.URL())}
	if err := cfg.Resolve(b.Context(), []brokers.Message{{Value: []byte{0, 0, 0, 0, byte(id)}}}); err != nil {
		b.Fatal(err)
	}
	md := cfg.Registry.cached(id).compiled.(protoreflect.FileDescriptor).Messages().Get(0)
	m := dynamicpb.NewMessage(md)
	if err := protojson.Unmarshal([]byte(event), m); err != nil {
		b.Fatal(err)
	}
	payload, err := proto.Marshal(m)
	if err != nil {
		b.Fatal(err)
	}
	benchWire(b, cfg, append([]byte{0, 0, 0, 0, byte(id), 0}, payload...))
}
