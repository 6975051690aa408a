package decode

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/bufbuild/protocompile"
	"github.com/hamba/avro/v2"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/drover-dev/drover/brokers"
)

// Format is how a source's message bodies are written (decode.format).
type Format string

// The formats. Every one but FormatJSON is the Confluent wire format: a
// magic byte 0, the schema id as 4 bytes big-endian, for Protobuf the
// message-index list, then the body in the schema's encoding.
const (
	FormatJSON       Format = "json" // the default ("" too)
	FormatAvro       Format = "avro"
	FormatProtobuf   Format = "protobuf"
	FormatJSONSchema Format = "json_schema"
)

// Formats lists the formats, for messages.
var Formats = []Format{FormatJSON, FormatAvro, FormatProtobuf, FormatJSONSchema}

// wire reports whether f is a schema registry format.
func (f Format) wire() bool { return f != "" && f != FormatJSON }

func (f Format) valid() bool {
	switch f {
	case "", FormatJSON, FormatAvro, FormatProtobuf, FormatJSONSchema:
		return true
	}
	return false
}

// The registry's schema types.
const (
	typeAvro     = "AVRO"
	typeProtobuf = "PROTOBUF"
	typeJSON     = "JSON"
)

// schemaType is the registry's name of f's schemas.
func (f Format) schemaType() string {
	switch f {
	case FormatProtobuf:
		return typeProtobuf
	case FormatJSONSchema:
		return typeJSON
	}
	return typeAvro
}

// Reasons of wire-format dead letters (see Record).
const (
	PrefixWire   = "wire format: "
	PrefixSchema = "schema id "
)

// wireID reads the magic byte and the schema id of a wire-format body.
func wireID(b []byte) (id int, rest []byte, err error) {
	if len(b) < 5 {
		return 0, nil, fmt.Errorf(PrefixWire+"%d bytes, want at least 5 (magic byte 0 and a 4-byte schema id); no schema id", len(b))
	}
	if b[0] != 0 {
		return 0, nil, fmt.Errorf(PrefixWire+"magic byte 0x%02x, want 0x00; no schema id", b[0])
	}
	return int(binary.BigEndian.Uint32(b[1:5])), b[5:], nil
}

// Resolve makes sure the schemas the messages name are at hand, fetching
// them from the registry (a job does this before the messages are
// decoded: Record does no I/O). It fails, wrapping ErrRegistry, only when
// the registry cannot be asked: then the messages must not be decoded
// yet (the unit retries). JSON sources have nothing to resolve.
func (c Config) Resolve(ctx context.Context, msgs []brokers.Message) error {
	if !c.Format.wire() || c.Registry == nil {
		return nil
	}
	return c.Registry.resolve(ctx, msgs)
}

// wireJSON turns a wire-format body into the JSON document it stands for,
// or says why it cannot be (a dead letter's reason, naming the schema id).
func (c Config) wireJSON(body []byte) ([]byte, string) {
	id, rest, err := wireID(body)
	if err != nil {
		return nil, err.Error()
	}
	var s *schema
	if c.Registry != nil {
		s = c.Registry.cached(id)
	}
	name := fmt.Sprintf(PrefixSchema+"%d", id)
	switch {
	case s == nil:
		return nil, name + ": not resolved (no registry asked)"
	case s.notFound && s.missing != "":
		return nil, name + ": its reference " + s.missing + " not found in the registry"
	case s.notFound:
		return nil, name + ": not found in the registry"
	case s.typ != c.Format.schemaType():
		return nil, fmt.Sprintf("%s: a %s schema, but the source's decode.format is %s", name, s.typ, c.Format)
	case s.bad != "":
		return nil, name + ": unusable schema: " + s.bad
	}
	var out []byte
	switch sc := s.compiled.(type) {
	case avro.Schema:
		out, err = avroJSON(sc, rest, make([]byte, 0, 2*len(rest)+16))
	case protoreflect.FileDescriptor:
		out, err = protoJSON(sc, rest)
	case *jsonschema.Schema:
		out, err = validJSON(sc, rest)
	}
	if err != nil {
		return nil, fmt.Sprintf("%s (%s): the body does not match the schema: %v", name, c.Format, err)
	}
	return out, ""
}

// normType is the registry's schema type in capitals, AVRO when it gives
// none.
func normType(t string) string {
	if t == "" {
		return typeAvro
	}
	return strings.ToUpper(t)
}

// compile parses a registry schema (with the schemas it refers to) into
// the form its decoder uses.
func compile(sch brokers.RegisteredSchema, refs []reference) (any, error) {
	switch normType(sch.Type) {
	case typeAvro:
		cache := &avro.SchemaCache{}
		for _, r := range refs {
			if _, err := avro.ParseWithCache(r.text, "", cache); err != nil {
				return nil, fmt.Errorf("reference %s: %v", r.name, err)
			}
		}
		return avro.ParseWithCache(sch.Text, "", cache)
	case typeProtobuf:
		files := map[string]string{"drover-schema.proto": sch.Text}
		for _, r := range refs {
			files[r.name] = r.text
		}
		comp := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
			Accessor: protocompile.SourceAccessorFromMap(files)})}
		fds, err := comp.Compile(context.Background(), "drover-schema.proto")
		if err != nil {
			return nil, err
		}
		return protoreflect.FileDescriptor(fds[0]), nil
	case typeJSON:
		comp := jsonschema.NewCompiler()
		for _, r := range refs {
			doc, err := jsonschema.UnmarshalJSON(strings.NewReader(r.text))
			if err != nil {
				return nil, fmt.Errorf("reference %s: %v", r.name, err)
			}
			if err := comp.AddResource(r.name, doc); err != nil {
				return nil, fmt.Errorf("reference %s: %v", r.name, err)
			}
		}
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(sch.Text))
		if err != nil {
			return nil, err
		}
		const loc = "drover-schema.json"
		if err := comp.AddResource(loc, doc); err != nil {
			return nil, err
		}
		return comp.Compile(loc)
	}
	return nil, fmt.Errorf("schema type %q is not supported", sch.Type)
}

// protoJSON decodes a Protobuf body (its message-index list first) of a
// message of file fd into JSON: protojson with the .proto field names
// and every field present (unset ones as their zero value, null for a
// message), so that a Debezium envelope has its before and after.
func protoJSON(fd protoreflect.FileDescriptor, b []byte) ([]byte, error) {
	index, rest, err := protoIndex(b)
	if err != nil {
		return nil, err
	}
	var md protoreflect.MessageDescriptor
	msgs := fd.Messages()
	for _, i := range index {
		if i < 0 || i >= msgs.Len() {
			return nil, fmt.Errorf("message index %v: no such message in the schema", index)
		}
		md = msgs.Get(i)
		msgs = md.Messages()
	}
	if md == nil {
		return nil, fmt.Errorf("the schema has no message")
	}
	m := dynamicpb.NewMessage(md)
	if err := (proto.UnmarshalOptions{}).Unmarshal(rest, m); err != nil {
		return nil, err
	}
	return protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}.Marshal(m)
}

// protoIndex reads the message-index list: a zig-zag varint count, then
// that many zig-zag varint indexes; a count of 0 is the first message
// ([0]).
func protoIndex(b []byte) ([]int, []byte, error) {
	n, k := binary.Varint(b)
	if k <= 0 {
		return nil, nil, fmt.Errorf("message-index list: bad count")
	}
	b = b[k:]
	if n == 0 {
		return []int{0}, b, nil
	}
	if n < 0 || n > 64 {
		return nil, nil, fmt.Errorf("message-index list of %d entries", n)
	}
	index := make([]int, n)
	for i := range index {
		v, k := binary.Varint(b)
		if k <= 0 {
			return nil, nil, fmt.Errorf("message-index list: bad entry %d", i)
		}
		index[i], b = int(v), b[k:]
	}
	return index, b, nil
}

// validJSON checks a JSON Schema body against its schema; the body is the
// document.
func validJSON(sc *jsonschema.Schema, b []byte) ([]byte, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	if err := sc.Validate(v); err != nil {
		return nil, oneLine(err.Error())
	}
	return b, nil
}

// oneLine folds a multi-line validation report into one line.
func oneLine(s string) error {
	return fmt.Errorf("%s", strings.Join(strings.Fields(s), " "))
}
