package decode

import (
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/internal/srtest"
	"github.com/drover-dev/drover/persistence"
)

const protoSchema = `syntax = "proto3";
package shop;
message Other { string x = 1; }
message Order {
  int64 id = 1;
  string name = 2;
  message Line { string sku = 1; int32 qty = 2; }
  repeated Line lines = 3;
}`

func TestProtobufAndJSONSchemaRecords(t *testing.T) {
	reg := srtest.New(t, "", "")
	pid := reg.Add("orders-value", srtest.Schema{Schema: protoSchema, Type: "PROTOBUF"})
	jid := reg.Add("js-value", srtest.Schema{Type: "JSON", Schema: `{"type":"object","required":["id"],"properties":{"id":{"type":"integer"},"name":{"type":"string"}}}`})
	r := newRegistry(t, reg.URL())
	pcfg := Config{KeyField: "id", Format: FormatProtobuf, Registry: r}
	jcfg := Config{KeyField: "id", Format: FormatJSONSchema, Registry: r}
	if err := pcfg.Resolve(context.Background(), []brokers.Message{{Value: []byte{0, 0, 0, 0, byte(pid)}}, {Value: []byte{0, 0, 0, 0, byte(jid)}}}); err != nil {
		t.Fatal(err)
	}

	// a producer's bytes: dynamicpb message of the registry's schema,
	// framed by sr.Serde with the message index [1] (Order)
	md := r.cached(pid).compiled.(protoreflect.FileDescriptor).Messages().Get(1)
	m := dynamicpb.NewMessage(md)
	m.Set(md.Fields().ByName("id"), protoreflect.ValueOfInt64(42))
	m.Set(md.Fields().ByName("name"), protoreflect.ValueOfString("n"))
	var serde sr.Serde
	serde.Register(pid, &dynamicpb.Message{}, sr.EncodeFn(func(v any) ([]byte, error) { return proto.Marshal(v.(*dynamicpb.Message)) }), sr.Index(1))
	body, err := serde.Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	var js sr.Serde
	js.Register(jid, map[string]any{}, sr.EncodeFn(func(v any) ([]byte, error) { return []byte(v.(map[string]any)["raw"].(string)), nil }))
	jgood, _ := js.Encode(map[string]any{"raw": `{"id":7,"name":"x"}`})
	jbad, _ := js.Encode(map[string]any{"raw": `{"name":"x"}`})

	tests := []struct {
		name   string
		cfg    Config
		value  []byte
		kind   persistence.OpKind
		doc    string
		reason string
	}{
		{name: "protobuf", cfg: pcfg, value: body, kind: persistence.OpUpsert, doc: `{"id":"42","lines":[],"name":"n"}`},
		{name: "protobuf corrupt", cfg: pcfg, value: append(body[:len(body)-2:len(body)-2], 0xff), kind: persistence.OpDeadLetter, reason: "schema id 1 (protobuf): the body does not match the schema"},
		{name: "protobuf bad index", cfg: pcfg, value: append([]byte{0, 0, 0, 0, byte(pid), 2, 18}, body[7:]...), kind: persistence.OpDeadLetter, reason: "schema id 1 (protobuf): the body does not match the schema: message index [9]"},
		{name: "json schema", cfg: jcfg, value: jgood, kind: persistence.OpUpsert, doc: `{"id":7,"name":"x"}`},
		{name: "json schema invalid", cfg: jcfg, value: jbad, kind: persistence.OpDeadLetter, reason: "schema id 2 (json_schema): the body does not match the schema"},
		{name: "json schema with protobuf id", cfg: jcfg, value: body, kind: persistence.OpDeadLetter, reason: "schema id 1: a PROTOBUF schema, but the source's decode.format is json_schema"},
	}
	for _, tc := range tests {
		op := tc.cfg.Record(brokers.Message{Key: []byte("k"), Value: tc.value})
		if op.Kind != tc.kind || string(op.Doc) != tc.doc || !strings.HasPrefix(op.Reason, tc.reason) {
			t.Errorf("%s: got %v doc %s reason %q; want %v %s %q", tc.name, op.Kind, op.Doc, op.Reason, tc.kind, tc.doc, tc.reason)
		}
		// the docs above are compact: DocChecked tells the store so
		if op.DocChecked != (tc.kind == persistence.OpUpsert) {
			t.Errorf("%s: DocChecked %v for a %v", tc.name, op.DocChecked, op.Kind)
		}
	}
}
