package brokers

import "context"

// SchemaRegistry is a schema registry (Confluent's API: schemas by id,
// subjects' versions) as the decoder of the wire formats asks it
// (actors/decode.Registry); brokers/kafka.SchemaRegistry is the one on
// franz-go's pkg/sr client, the simulator has one in memory. Its methods
// may block (they run in jobs) and must be safe for concurrent use. found
// is false when the registry answers that it has no such schema; err is
// set when it could not be asked (unreachable, refusing, failing).
type SchemaRegistry interface {
	SchemaByID(ctx context.Context, id int) (s RegisteredSchema, found bool, err error)
	SchemaByVersion(ctx context.Context, subject string, version int) (s RegisteredSchema, found bool, err error)
}

// RegisteredSchema is a registry's schema: its text, its type (AVRO, ""
// meaning AVRO too, PROTOBUF or JSON) and the schemas it refers to.
type RegisteredSchema struct {
	Text       string
	Type       string
	References []SchemaReference
}

// SchemaReference is a schema's reference to a subject's version, by the
// name the schema uses for it (a .proto import path, an Avro or JSON
// Schema name).
type SchemaReference struct {
	Name, Subject string
	Version       int
}
