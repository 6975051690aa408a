package decode

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/tracecontext"
	"github.com/drover-dev/drover/internal/mutate"
	"github.com/drover-dev/drover/persistence"
)

// DefaultMaxBytes is the largest body Record and Raw accept when
// Config.MaxBytes is 0: 1 MiB.
const DefaultMaxBytes = 1 << 20

// DefaultMaxDeadLetterBytes is the most bytes of a body a dead letter keeps
// when Config.MaxDeadLetterBytes is 0: 256 KiB.
const DefaultMaxDeadLetterBytes = 256 << 10

// MaxReasonBytes is the longest dead-letter reason kept; a longer one (a
// handler's or the store's message, which may quote the whole row) is cut
// on a character boundary and ends in "…".
const MaxReasonBytes = 1024

// Config says how a source's messages become records. The zero value keys
// records by the message key, accepts bodies up to 1 MiB and keeps up to
// 256 KiB of a dead letter's body.
type Config struct {
	// KeyField is the dotted path of the record key inside the JSON object
	// ("id", "customer.id"). Empty: the message key is the record key.
	// A path segment cannot contain a dot.
	KeyField string
	// MaxBytes is the largest body accepted; larger ones are dead-lettered.
	// 0 means DefaultMaxBytes.
	MaxBytes int
	// MaxDeadLetterBytes is the most bytes of a body a dead letter keeps
	// (dead_letter_max_bytes): a longer body is cut, and the dead letter
	// records its whole size (persistence.Op.PayloadBytes), so that an
	// oversize message cannot make its batch too large for the store.
	// 0 means DefaultMaxDeadLetterBytes.
	MaxDeadLetterBytes int
	// Format is how bodies are written (decode.format): "" or FormatJSON
	// for JSON, or a Confluent wire format, whose schemas Registry holds.
	Format Format
	// Registry fetches and keeps the schemas of a wire format; it must be
	// set for those, and Resolve must have seen a message before Record
	// decodes it.
	Registry *Registry
}

// Validate reports a KeyField with an empty segment or a negative MaxBytes
// or MaxDeadLetterBytes.
func (c Config) Validate() error {
	if c.MaxBytes < 0 {
		return fmt.Errorf("decode: max bytes %d: must not be negative", c.MaxBytes)
	}
	if c.MaxDeadLetterBytes < 0 {
		return fmt.Errorf("decode: max dead-letter bytes %d: must not be negative", c.MaxDeadLetterBytes)
	}
	if !c.Format.valid() {
		return fmt.Errorf("decode: format %q: must be one of json, avro, protobuf, json_schema", c.Format)
	}
	if c.Format.wire() && c.Registry == nil {
		return fmt.Errorf("decode: format %s needs a schema registry", c.Format)
	}
	if c.KeyField != "" {
		for i, seg := range strings.Split(c.KeyField, ".") {
			if seg == "" {
				return fmt.Errorf("decode: key field %q: segment %d is empty", c.KeyField, i+1)
			}
		}
	}
	return nil
}

func (c Config) maxBytes() int {
	if c.MaxBytes <= 0 {
		return DefaultMaxBytes
	}
	return c.MaxBytes
}

func (c Config) maxDeadLetterBytes() int {
	if c.MaxDeadLetterBytes <= 0 {
		return DefaultMaxDeadLetterBytes
	}
	return c.MaxDeadLetterBytes
}

// MaxKeyBytes is the longest record key accepted: PostgreSQL refuses
// B-tree index entries over about 2700 bytes, which would fail the whole
// batch.
const MaxKeyBytes = 2048

// Reasons of dead letters that do not carry details, and the prefixes of
// those that do (see Record).
const (
	ReasonNoKey     = "no key"
	ReasonEmptyBody = "invalid JSON: empty body"

	PrefixInvalidJSON     = "invalid JSON: "     // not RFC 8259 JSON
	PrefixUnsupportedJSON = "unsupported JSON: " // JSON that no store can keep
	PrefixNotObject       = "not a JSON object: "
	PrefixNoKey           = "no key"
)

// Record decodes one message of a records-mode source (architecture §7).
// It always returns exactly one op, of kind OpUpsert, OpDelete or OpDeadLetter, with
// Position and MessageID (= m.ID) set from the message. It never fails: what
// cannot be applied becomes a dead letter whose Payload is the raw body
// (its first MaxDeadLetterBytes, the whole size in PayloadBytes, when it is
// longer), whose MsgKey is MsgKey(m.Key), and whose Reason is one of:
//
//	<the adapter's reason>                          (brokers.Message.Reject: a corrupt KPL aggregate)
//	message of N bytes exceeds max_message_bytes M
//	invalid JSON: empty body                       (no key and no body)
//	invalid JSON: <what> at offset N                 (not RFC 8259 JSON, or invalid UTF-8)
//	unsupported JSON: <what> at offset N             (\u0000, a lone surrogate, nesting > 1000,
//	                                                  a number beyond PostgreSQL's numeric range)
//	not a JSON object: array|string|number|boolean|null
//	no key                                           (no key field configured and no message key)
//	no key: field "a.b" is missing|is empty
//	key field "a.b" is object|array|boolean|null, want string or number
//	message key is not valid UTF-8|message key contains a NUL byte
//	key of N bytes exceeds 2048 bytes
//	Debezium op "c": after is null, want an object   (also u, r)
//	Debezium op "d": before is null, want an object  (only with a key field)
//
// and, for a wire format (Format avro, protobuf, json_schema), before the
// JSON rules apply to the decoded document:
//
//	wire format: N bytes, want at least 5 (…); no schema id
//	wire format: magic byte 0xNN, want 0x00; no schema id
//	schema id N: not found in the registry
//	schema id N: its reference "name" (subject S version V) not found in the registry
//	schema id N: a PROTOBUF schema, but the source's decode.format is avro
//	schema id N: unusable schema: <parse or compile error>
//	schema id N (avro): the body does not match the schema: <what>
//
// The rules, in order (after a message the adapter rejected, which is
// dead-lettered with its reason):
//
//  1. A body longer than MaxBytes is dead-lettered.
//  2. A message with a key and no body (m.Tombstone, or an empty body, as
//     Debezium's tombstones arrive on brokers without a tombstone flag)
//     deletes the message key, even when a key field is configured.
//  3. A body that is not JSON, or JSON that is not an object, is
//     dead-lettered.
//  4. A Debezium change event, bare or in a {"payload": …} wrapper, is one
//     whose "op" is "c", "u", "r" or "d" and that has "before" and "after"
//     members: "d" deletes the key of "before", the others upsert "after".
//  5. An object whose "_deleted" member is true deletes its key.
//  6. Any other object is upserted.
//
// A key comes from KeyField (a string's text, or a number's literal text:
// 42, 4.20, 1e3), or when KeyField is empty from the message key, which
// must then be valid UTF-8 without NUL bytes (the store keeps keys as text).
// An upsert's Doc is the canonical form of the object (see Canonical): the
// same document always gives the same bytes, so stores can compare them.
func (c Config) Record(m brokers.Message) persistence.Op {
	op := persistence.Op{Position: m.Position, MessageID: m.ID}
	if m.Reject != "" {
		return c.dead(op, m, m.Reject)
	}
	if max := c.maxBytes(); len(m.Value) > max {
		return c.dead(op, m, fmt.Sprintf("message of %d bytes exceeds max_message_bytes %d", len(m.Value), max))
	}
	if m.Tombstone || (len(m.Value) == 0 && len(m.Key) > 0) {
		return c.keyed(op, m, persistence.OpDelete, -1, nil)
	}
	if len(m.Value) == 0 {
		return c.dead(op, m, ReasonEmptyBody)
	}
	body := m.Value
	if c.Format.wire() {
		var reason string
		if body, reason = c.wireJSON(m.Value); reason != "" {
			return c.dead(op, m, reason)
		}
	}
	p := getParser()
	defer putParser(p)
	if err := p.parse(body); err != nil {
		return c.dead(op, m, err.Error())
	}
	if k := p.nodes[0].kind; k != kindObject {
		return c.dead(op, m, PrefixNotObject+k.typeName())
	}
	root := 0
	if pl := p.member(0, "payload"); pl >= 0 && p.isDebezium(pl) {
		root = pl
	}
	if p.isDebezium(root) {
		opName := string(p.str(p.member(root, "op")))
		if opName == "d" {
			before := p.member(root, "before")
			if p.nodes[before].kind != kindObject {
				if c.KeyField != "" {
					return c.dead(op, m, fmt.Sprintf("Debezium op %q: before is %s, want an object", opName, p.nodes[before].kind.typeName()))
				}
				before = -1
			}
			return c.keyed(op, m, persistence.OpDelete, before, p)
		}
		after := p.member(root, "after")
		if p.nodes[after].kind != kindObject {
			return c.dead(op, m, fmt.Sprintf("Debezium op %q: after is %s, want an object", opName, p.nodes[after].kind.typeName()))
		}
		return c.keyed(op, m, persistence.OpUpsert, after, p)
	}
	if d := p.member(0, "_deleted"); d >= 0 && p.nodes[d].kind == kindTrue {
		return c.keyed(op, m, persistence.OpDelete, 0, p)
	}
	return c.keyed(op, m, persistence.OpUpsert, 0, p)
}

// isDebezium reports whether node i is a Debezium change event.
func (p *parser) isDebezium(i int) bool {
	if p.nodes[i].kind != kindObject {
		return false
	}
	o := p.member(i, "op")
	if o < 0 || p.nodes[o].kind != kindString {
		return false
	}
	switch string(p.str(o)) {
	case "c", "u", "r", "d":
	default:
		return false
	}
	return p.member(i, "before") >= 0 && p.member(i, "after") >= 0
}

// keyed finishes op as kind with the key found in object obj (KeyField) or
// the message key (KeyField empty or obj < 0). An upsert's Doc is obj's
// canonical form.
func (c Config) keyed(op persistence.Op, m brokers.Message, kind persistence.OpKind, obj int, p *parser) persistence.Op {
	var key string
	if c.KeyField == "" || obj < 0 {
		if len(m.Key) == 0 {
			return c.dead(op, m, ReasonNoKey)
		}
		if !utf8.Valid(m.Key) {
			return c.dead(op, m, "message key is not valid UTF-8")
		}
		if bytes.IndexByte(m.Key, 0) >= 0 {
			return c.dead(op, m, "message key contains a NUL byte")
		}
		key = string(m.Key)
	} else {
		v := obj
		for rest := c.KeyField; v >= 0; {
			var seg string
			seg, rest, _ = strings.Cut(rest, ".")
			if p.nodes[v].kind != kindObject {
				v = -1
				break
			}
			v = p.member(v, seg)
			if rest == "" {
				break
			}
		}
		if v < 0 {
			return c.dead(op, m, fmt.Sprintf("no key: field %q is missing", c.KeyField))
		}
		switch nd := p.nodes[v]; nd.kind {
		case kindString:
			key = string(p.str(v))
		case kindNumber:
			key = string(p.src[nd.start:nd.end])
		default:
			return c.dead(op, m, fmt.Sprintf("key field %q is %s, want string or number", c.KeyField, nd.kind.typeName()))
		}
		if key == "" {
			return c.dead(op, m, fmt.Sprintf("no key: field %q is empty", c.KeyField))
		}
	}
	if len(key) > MaxKeyBytes {
		return c.dead(op, m, fmt.Sprintf("key of %d bytes exceeds %d bytes", len(key), MaxKeyBytes))
	}
	op.Kind, op.Key = kind, key
	if kind == persistence.OpUpsert {
		op.Doc = p.canonical(make([]byte, 0, p.nodes[obj].end-p.nodes[obj].start), obj)
		op.DocChecked = true // canonical writes parsed JSON, compact
	}
	return op
}

func (c Config) dead(op persistence.Op, m brokers.Message, reason string) persistence.Op {
	op.Kind = persistence.OpDeadLetter
	op.Reason = withTraceID(reason, m)
	op.MsgKey = MsgKey(m.Key)
	op.Payload = m.Value
	if max := c.maxDeadLetterBytes(); len(m.Value) > max && !mutate.On(mutate.WholeDeadLetters) {
		op.Payload, op.PayloadBytes = m.Value[:max:max], len(m.Value)
	}
	return op
}

// Dead makes m a dead letter with reason, as Record does: Position and
// MessageID from the message, MsgKey(m.Key), the body cut at
// MaxDeadLetterBytes (its size in PayloadBytes), and the reason cut at
// MaxReasonBytes. The runtime uses it for messages a handler or the store
// refuses.
func (c Config) Dead(m brokers.Message, reason string) persistence.Op {
	return c.dead(persistence.Op{Position: m.Position, MessageID: m.ID}, m, reason)
}

// withTraceID is reason cut at MaxReasonBytes; when m carries a W3C
// traceparent, " trace_id=<32 hex digits>" ends it (kept whole, the reason
// before it cut shorter), so that an operator finds the producer's trace of
// a dead letter (drover_dead_letters has no column for it: the reason
// holds it).
func withTraceID(reason string, m brokers.Message) string {
	return ReasonWithTraceID(reason, tracecontext.TraceID(m))
}

// TraceIDField starts the trace id at the end of a dead letter's reason.
const TraceIDField = "trace_id="

// ReasonWithTraceID is reason cut at MaxReasonBytes, ending with
// " trace_id=<id>" when id is not "" and reason does not end with it yet.
func ReasonWithTraceID(reason, id string) string {
	if id == "" || ReasonTraceID(reason) == id {
		return cutReason(reason, MaxReasonBytes)
	}
	sfx := " " + TraceIDField + id
	return cutReason(reason, MaxReasonBytes-len(sfx)) + sfx
}

// ReasonTraceID is the trace id at the end of a dead letter's reason
// (ReasonWithTraceID), "" when there is none.
func ReasonTraceID(reason string) string {
	_, id, ok := strings.Cut(reason[max(0, len(reason)-len(TraceIDField)-33):], " "+TraceIDField)
	if !ok || len(id) != 32 || strings.Trim(id, "0123456789abcdef") != "" {
		return ""
	}
	return id
}

// cutReason cuts a reason longer than limit bytes on a character boundary
// and marks the cut.
func cutReason(r string, limit int) string {
	if len(r) <= limit {
		return r
	}
	const mark = "…"
	n := limit - len(mark)
	for n > 0 && !utf8.RuneStart(r[n]) {
		n--
	}
	return r[:n] + mark
}

// Raw decodes one message of a handler-mode source: an OpMessage whose
// Payload is the body and whose Key is the message key as a string (any
// bytes; nil key: ""), or a dead letter when the adapter rejected the
// message (brokers.Message.Reject) or the body is longer than MaxBytes. A
// tombstone arrives as an OpMessage with a nil Payload.
// Position and MessageID are set as by Record.
func (c Config) Raw(m brokers.Message) persistence.Op {
	op := persistence.Op{Position: m.Position, MessageID: m.ID}
	if m.Reject != "" {
		return c.dead(op, m, m.Reject)
	}
	if max := c.maxBytes(); len(m.Value) > max {
		return c.dead(op, m, fmt.Sprintf("message of %d bytes exceeds max_message_bytes %d", len(m.Value), max))
	}
	op.Kind = persistence.OpMessage
	op.Key = string(m.Key)
	op.Payload = m.Value
	if m.Tombstone {
		op.Payload = nil
	}
	return op
}

// msgKeyB64 marks a dead letter's MsgKey that is base64 of the key.
const msgKeyB64 = "base64:"

// MsgKey is the text form of a message key kept with a dead letter (the
// store keeps it as text). A key that is valid UTF-8, has no NUL byte and
// does not start with "base64:" is kept as is; any other key is "base64:"
// followed by its standard base64 encoding. KeyBytes reverses it.
func MsgKey(key []byte) string {
	if utf8.Valid(key) && bytes.IndexByte(key, 0) < 0 && !bytes.HasPrefix(key, []byte(msgKeyB64)) {
		return string(key)
	}
	return msgKeyB64 + base64.StdEncoding.EncodeToString(key)
}

// KeyBytes returns the message key a MsgKey string stands for (dead-letter
// replay rebuilds the message with it). An empty string is no key (nil).
func KeyBytes(msgKey string) ([]byte, error) {
	if msgKey == "" {
		return nil, nil
	}
	if rest, ok := strings.CutPrefix(msgKey, msgKeyB64); ok {
		b, err := base64.StdEncoding.DecodeString(rest)
		if err != nil {
			return nil, fmt.Errorf("decode: message key %q: bad base64: %w", msgKey, err)
		}
		return b, nil
	}
	return []byte(msgKey), nil
}
