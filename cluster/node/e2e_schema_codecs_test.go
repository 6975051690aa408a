package node_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/bufbuild/protocompile"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/drover-dev/drover/internal/srtest"
)

const (
	protoOrderV1 = `syntax = "proto3";
package shop;
message Order { int64 id = 1; string name = 2; string price = 3; string at = 4; }`
	protoOrderV2 = `syntax = "proto3";
package shop;
message Order { int64 id = 1; string name = 2; string price = 3; string at = 4; int32 qty = 5; string note = 6; }`
	protoDebezium = `syntax = "proto3";
package pg;
message Customer { int64 id = 1; string email = 2; }
message Envelope { Customer before = 1; Customer after = 2; string op = 3; int64 ts_ms = 4; }`
)

// protoCodec: messages built with dynamicpb from the registry's .proto
// text (compiled with protocompile), framed by sr.Serde with their
// message index.
type protoCodec struct {
	t              testing.TB
	serde          sr.Serde
	v1, v2, env    protoreflect.MessageDescriptor
	customer       protoreflect.MessageDescriptor
	v1ID, v2ID, id int
}

type (
	pbV1  struct{ m *dynamicpb.Message }
	pbV2  struct{ m *dynamicpb.Message }
	pbEnv struct{ m *dynamicpb.Message }
)

func protoFile(t testing.TB, text string) protoreflect.FileDescriptor {
	t.Helper()
	c := protocompile.Compiler{Resolver: &protocompile.SourceResolver{Accessor: protocompile.SourceAccessorFromMap(map[string]string{"x.proto": text})}}
	fds, err := c.Compile(context.Background(), "x.proto")
	if err != nil {
		t.Fatal(err)
	}
	return fds[0]
}

func (c *protoCodec) format() string { return "protobuf" }

func (c *protoCodec) setup(t *testing.T, reg *srtest.Registry) (int, srtest.Schema) {
	c.t = t
	c.v1ID = reg.Add("orders-value", srtest.Schema{Schema: protoOrderV1, Type: "PROTOBUF"})
	c.id = reg.Add("cdc-value", srtest.Schema{Schema: protoDebezium, Type: "PROTOBUF"})
	c.v2ID = c.v1ID + 100
	c.v1 = protoFile(t, protoOrderV1).Messages().Get(0)
	c.v2 = protoFile(t, protoOrderV2).Messages().Get(0)
	fd := protoFile(t, protoDebezium)
	c.customer, c.env = fd.Messages().Get(0), fd.Messages().Get(1)
	enc := func(v any) ([]byte, error) {
		switch m := v.(type) {
		case pbV1:
			return proto.Marshal(m.m)
		case pbV2:
			return proto.Marshal(m.m)
		}
		return proto.Marshal(v.(pbEnv).m)
	}
	c.serde.Register(c.v1ID, pbV1{}, sr.EncodeFn(enc), sr.Index(0))
	c.serde.Register(c.v2ID, pbV2{}, sr.EncodeFn(enc), sr.Index(0))
	c.serde.Register(c.id, pbEnv{}, sr.EncodeFn(enc), sr.Index(1))
	return c.v2ID, srtest.Schema{Schema: protoOrderV2, Type: "PROTOBUF"}
}

func (c *protoCodec) order(o srOrder, v2 bool) []byte {
	md := c.v1
	if v2 {
		md = c.v2
	}
	m := dynamicpb.NewMessage(md)
	set := func(name string, v protoreflect.Value) { m.Set(md.Fields().ByName(protoreflect.Name(name)), v) }
	set("id", protoreflect.ValueOfInt64(o.id))
	set("name", protoreflect.ValueOfString(o.name))
	set("price", protoreflect.ValueOfString(strconv.FormatFloat(float64(o.cents)/100, 'f', 2, 64)))
	set("at", protoreflect.ValueOfString(o.at.Format(time.RFC3339Nano)))
	if v2 {
		set("qty", protoreflect.ValueOfInt32(o.qty))
		set("note", protoreflect.ValueOfString(o.note))
		return serdeEncode(c.t, &c.serde, pbV2{m})
	}
	return serdeEncode(c.t, &c.serde, pbV1{m})
}

func (c *protoCodec) change(op string, before, after *srCustomer, ts int64) []byte {
	m := dynamicpb.NewMessage(c.env)
	row := func(field string, r *srCustomer) {
		if r == nil {
			return
		}
		cm := dynamicpb.NewMessage(c.customer)
		cm.Set(c.customer.Fields().ByName("id"), protoreflect.ValueOfInt64(r.id))
		cm.Set(c.customer.Fields().ByName("email"), protoreflect.ValueOfString(r.email))
		m.Set(c.env.Fields().ByName(protoreflect.Name(field)), protoreflect.ValueOfMessage(cm))
	}
	row("before", before)
	row("after", after)
	m.Set(c.env.Fields().ByName("op"), protoreflect.ValueOfString(op))
	m.Set(c.env.Fields().ByName("ts_ms"), protoreflect.ValueOfInt64(ts))
	return serdeEncode(c.t, &c.serde, pbEnv{m})
}

func (c *protoCodec) corrupt() []byte {
	good := c.order(srOrder{id: 2, name: "a longer name", at: time.Unix(0, 0)}, false)
	// the header and index of a good one, then field 2 claiming 64 bytes
	return append(good[:6:6], 0x12, 0x40, 'x')
}

// jsonSchemaCodec: JSON bodies framed by sr.Serde, schemas that the
// orders and change events satisfy.
type jsonSchemaCodec struct {
	t          testing.TB
	serde      sr.Serde
	v1ID, v2ID int
}

type (
	jsV1  map[string]any
	jsV2  map[string]any
	jsEnv map[string]any
)

const (
	jsOrderV1 = `{"type":"object","required":["id","name"],"properties":{"id":{"type":"integer"},"name":{"type":"string"},"price":{"type":"number"},"at":{"type":"string"}}}`
	jsOrderV2 = `{"type":"object","required":["id","name","qty"],"properties":{"id":{"type":"integer"},"name":{"type":"string"},"qty":{"type":"integer","minimum":0}}}`
	jsChange  = `{"type":"object","required":["op","before","after"],"properties":{"op":{"enum":["c","u","d","r"]},
 "before":{"type":["object","null"],"required":["id"]},"after":{"type":["object","null"],"required":["id"]}}}`
)

func (c *jsonSchemaCodec) format() string { return "json_schema" }

func (c *jsonSchemaCodec) setup(t *testing.T, reg *srtest.Registry) (int, srtest.Schema) {
	c.t = t
	c.v1ID = reg.Add("orders-value", srtest.Schema{Schema: jsOrderV1, Type: "JSON"})
	env := reg.Add("cdc-value", srtest.Schema{Schema: jsChange, Type: "JSON"})
	c.v2ID = c.v1ID + 100
	enc := sr.EncodeFn(func(v any) ([]byte, error) { return json.Marshal(v) })
	c.serde.Register(c.v1ID, jsV1{}, enc)
	c.serde.Register(c.v2ID, jsV2{}, enc)
	c.serde.Register(env, jsEnv{}, enc)
	return c.v2ID, srtest.Schema{Schema: jsOrderV2, Type: "JSON"}
}

func (c *jsonSchemaCodec) order(o srOrder, v2 bool) []byte {
	m := map[string]any{"id": o.id, "name": o.name, "price": float64(o.cents) / 100, "at": o.at.Format(time.RFC3339Nano)}
	if v2 {
		m["qty"], m["note"] = o.qty, o.note
		return serdeEncode(c.t, &c.serde, jsV2(m))
	}
	return serdeEncode(c.t, &c.serde, jsV1(m))
}

func (c *jsonSchemaCodec) change(op string, before, after *srCustomer, ts int64) []byte {
	row := func(r *srCustomer) any {
		if r == nil {
			return nil
		}
		return map[string]any{"id": r.id, "email": r.email}
	}
	return serdeEncode(c.t, &c.serde, jsEnv{"op": op, "before": row(before), "after": row(after), "ts_ms": ts})
}

func (c *jsonSchemaCodec) corrupt() []byte {
	return serdeEncode(c.t, &c.serde, jsV1{"id": "two", "name": "x"}) // id must be an integer
}
