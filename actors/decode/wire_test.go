package decode

import (
	"context"
	"errors"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/kafka"
	"github.com/drover-dev/drover/internal/srtest"
	"github.com/drover-dev/drover/persistence"
)

const avroRow = `{"type":"record","name":"Row","namespace":"db.inv","fields":[
 {"name":"id","type":"long"},
 {"name":"name","type":"string"},
 {"name":"price","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
 {"name":"born","type":{"type":"int","logicalType":"date"}},
 {"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"at_us","type":{"type":"long","logicalType":"timestamp-micros"}},
 {"name":"uid","type":{"type":"string","logicalType":"uuid"}},
 {"name":"raw","type":"bytes"},
 {"name":"tags","type":{"type":"map","values":"int"}},
 {"name":"note","type":["null","string"],"default":null},
 {"name":"kind","type":{"type":"enum","name":"Kind","symbols":["A","B"]}}
]}`

// avroEnvelope is a Debezium change event of Row (the Avro converter's
// shape: before and after are unions of null and the row).
const avroEnvelope = `{"type":"record","name":"Envelope","namespace":"db.inv","fields":[
 {"name":"before","type":["null",{"type":"record","name":"Value","fields":[{"name":"id","type":"long"},{"name":"name","type":"string"}]}],"default":null},
 {"name":"after","type":["null","Value"],"default":null},
 {"name":"op","type":"string"},
 {"name":"ts_ms","type":["null","long"],"default":null}
]}`

// serdeEncode encodes v for schema id with franz-go's sr.Serde and
// hamba/avro, as a producer does.
func serdeEncode(t testing.TB, id int, schema string, v any) []byte {
	t.Helper()
	s := avro.MustParse(schema)
	var serde sr.Serde
	serde.Register(id, map[string]any{}, sr.EncodeFn(func(v any) ([]byte, error) { return avro.Marshal(s, v) }))
	b, err := serde.Encode(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newRegistry(t testing.TB, url string) *Registry {
	t.Helper()
	return newRegistryAuth(t, kafka.RegistryConfig{URL: url, Timeout: 2 * time.Second})
}

// newRegistryAuth is a Registry on franz-go's client of rc.
func newRegistryAuth(t testing.TB, rc kafka.RegistryConfig) *Registry {
	t.Helper()
	src, err := kafka.NewSchemaRegistry(rc)
	if err != nil {
		t.Fatal(err)
	}
	return NewRegistryFrom(rc.URL, src, rc.Timeout)
}

func TestAvroRecords(t *testing.T) {
	reg := srtest.New(t, "", "")
	rowID := reg.Add("rows-value", srtest.Schema{Schema: avroRow})
	envID := reg.Add("cdc-value", srtest.Schema{Schema: avroEnvelope})
	protoID := reg.Add("p-value", srtest.Schema{Schema: `syntax = "proto3"; message M { int64 id = 1; }`, Type: "PROTOBUF"})
	cfg := Config{KeyField: "id", Format: FormatAvro, Registry: newRegistry(t, reg.URL())}
	at := time.Date(2026, 12, 2, 5, 6, 7, 891_000_000, time.UTC)
	row := map[string]any{"id": int64(7), "name": "a\"b", "price": big.NewRat(-12345, 100), "born": time.Date(1990, 3, 4, 0, 0, 0, 0, time.UTC),
		"at": at, "at_us": at.Add(234 * time.Microsecond), "uid": "0b6f3c1e-0000-4000-8000-000000000001", "raw": []byte{0, 1, 254},
		"tags": map[string]any{"x": 1}, "note": nil, "kind": "B"}
	good := serdeEncode(t, rowID, avroRow, row)
	create := serdeEncode(t, envID, avroEnvelope, map[string]any{"before": nil, "after": map[string]any{"db.inv.Value": map[string]any{"id": int64(1), "name": "n1"}}, "op": "c", "ts_ms": int64(5)})
	del := serdeEncode(t, envID, avroEnvelope, map[string]any{"before": map[string]any{"db.inv.Value": map[string]any{"id": int64(1), "name": "n1"}}, "after": nil, "op": "d", "ts_ms": nil})
	unknown := append([]byte{0, 0, 0, 0, 99}, good[5:]...)
	corrupt := append(append([]byte(nil), good[:5]...), 0xff, 0xff, 0xff)
	wrongType := append([]byte{0, 0, 0, 0, byte(protoID)}, good[5:]...)
	tests := []struct {
		name   string
		value  []byte
		kind   persistence.OpKind
		key    string
		doc    string
		reason string
	}{
		{name: "row", value: good, kind: persistence.OpUpsert, key: "7",
			doc: `{"at":"2026-12-02T05:06:07.891Z","at_us":"2026-12-02T05:06:07.891234Z","born":"1990-03-04","id":7,"kind":"B","name":"a\"b","note":null,"price":-123.45,"raw":"AAH+","tags":{"x":1},"uid":"0b6f3c1e-0000-4000-8000-000000000001"}`},
		{name: "debezium create", value: create, kind: persistence.OpUpsert, key: "1", doc: `{"id":1,"name":"n1"}`},
		{name: "debezium delete", value: del, kind: persistence.OpDelete, key: "1"},
		{name: "unknown id", value: unknown, kind: persistence.OpDeadLetter, reason: "schema id 99: not found in the registry"},
		{name: "corrupt", value: corrupt, kind: persistence.OpDeadLetter, reason: "schema id 1 (avro): the body does not match the schema"},
		{name: "protobuf schema", value: wrongType, kind: persistence.OpDeadLetter, reason: "schema id 3: a PROTOBUF schema, but the source's decode.format is avro"},
		{name: "trailing bytes", value: append(append([]byte(nil), good...), 7), kind: persistence.OpDeadLetter, reason: "schema id 1 (avro): the body does not match the schema: bytes left after the value"},
		{name: "magic", value: []byte(`{"id":1}`), kind: persistence.OpDeadLetter, reason: "wire format: magic byte 0x7b, want 0x00; no schema id"},
		{name: "short", value: []byte{0, 1}, kind: persistence.OpDeadLetter, reason: "wire format: 2 bytes, want at least 5"},
	}
	var msgs []brokers.Message
	for _, tc := range tests {
		msgs = append(msgs, brokers.Message{Position: "1", Key: []byte("k"), Value: tc.value})
	}
	if err := cfg.Resolve(context.Background(), msgs); err != nil {
		t.Fatal(err)
	}
	for i, tc := range tests {
		op := cfg.Record(msgs[i])
		if op.Kind != tc.kind || op.Key != tc.key && tc.key != "" || string(op.Doc) != tc.doc || !strings.HasPrefix(op.Reason, tc.reason) {
			t.Errorf("%s: got %v key %q doc %s reason %q; want %v %q %s %q", tc.name, op.Kind, op.Key, op.Doc, op.Reason, tc.kind, tc.key, tc.doc, tc.reason)
		}
		if op.Kind == persistence.OpDeadLetter && string(op.Payload) != string(tc.value) {
			t.Errorf("%s: dead letter payload is not the raw body", tc.name)
		}
	}
}

// A registry that cannot be reached fails Resolve (the unit retries) and
// dead-letters nothing; concurrent Resolves of one id send one request;
// an id once fetched is not asked again, even with the registry down.
func TestRegistryDownAndOncePerID(t *testing.T) {
	reg := srtest.New(t, "u", "p4ss-secret")
	id := reg.Add("rows-value", srtest.Schema{Schema: avroRow})
	cfg := Config{Format: FormatAvro, Registry: newRegistryAuth(t, kafka.RegistryConfig{URL: reg.URL(), Username: "u", Password: "p4ss-secret", Timeout: 2 * time.Second})}
	msgs := []brokers.Message{{Key: []byte("k"), Value: []byte{0, 0, 0, 0, byte(id), 0}}}
	reg.SetDown(true)
	err := cfg.Resolve(context.Background(), msgs)
	if !errors.Is(err, ErrRegistry) {
		t.Fatalf("resolve with the registry down: %v, want ErrRegistry", err)
	}
	if strings.Contains(err.Error(), "p4ss-secret") {
		t.Fatalf("the error shows the password: %v", err)
	}
	reg.SetDown(false)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := cfg.Resolve(context.Background(), msgs); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := reg.Requests(id); n != 1 {
		t.Fatalf("schema id %d asked %d times by 16 concurrent resolves, want 1", id, n)
	}
	// an unknown id met again and again in one fetch is asked once
	unknown := brokers.Message{Value: []byte{0, 0, 0, 0, 99, 0}}
	if err := cfg.Resolve(context.Background(), []brokers.Message{unknown, msgs[0], unknown, msgs[0], unknown}); err != nil {
		t.Fatal(err)
	}
	if n := reg.Requests(99); n != 1 {
		t.Fatalf("unknown schema id asked %d times in one fetch, want once", n)
	}
	reg.SetDown(true)
	if err := cfg.Resolve(context.Background(), msgs); err != nil {
		t.Fatalf("a cached id needs the registry: %v", err)
	}
}
