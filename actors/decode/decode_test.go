package decode

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/persistence"
)

func msg(key, value string) brokers.Message {
	m := brokers.Message{Position: "17", ID: "id-17", Value: []byte(value)}
	if key != "" {
		m.Key = []byte(key)
	}
	if value == "" {
		m.Value = nil
	}
	return m
}

func TestRecord(t *testing.T) {
	byID := Config{KeyField: "id"}
	nested := Config{KeyField: "customer.id"}
	tomb := msg("k1", "")
	tomb.Tombstone = true
	tombNoKey := brokers.Message{Position: "3", Tombstone: true}
	big := msg("k", `{"a":"`+strings.Repeat("x", 100)+`"}`)

	tests := []struct {
		name   string
		cfg    Config
		m      brokers.Message
		kind   persistence.OpKind
		key    string
		doc    string // upserts
		reason string // dead letters
	}{
		// Plain objects.
		{name: "object keyed by message key", m: msg("k1", `{"b":1,"a":2}`), kind: persistence.OpUpsert, key: "k1", doc: `{"a":2,"b":1}`},
		{name: "object keyed by field string", cfg: byID, m: msg("ignored", `{"id":"abc","v":true}`), kind: persistence.OpUpsert, key: "abc", doc: `{"id":"abc","v":true}`},
		{name: "object keyed by field number literal", cfg: byID, m: msg("", `{"id": 4.20}`), kind: persistence.OpUpsert, key: "4.20", doc: `{"id":4.20}`},
		{name: "big int key kept as written", cfg: byID, m: msg("", `{"id":123456789012345678901234567890}`), kind: persistence.OpUpsert, key: "123456789012345678901234567890", doc: `{"id":123456789012345678901234567890}`},
		{name: "dotted key path", cfg: nested, m: msg("", `{"customer":{"id":"c-9","n":1},"x":0}`), kind: persistence.OpUpsert, key: "c-9", doc: `{"customer":{"id":"c-9","n":1},"x":0}`},
		{name: "escaped key field name matches", cfg: byID, m: msg("", `{"\u0069d":"e"}`), kind: persistence.OpUpsert, key: "e", doc: `{"id":"e"}`},
		{name: "escaped key value decoded", cfg: byID, m: msg("", `{"id":"a\u00e9\"b"}`), kind: persistence.OpUpsert, key: "aé\"b", doc: `{"id":"aé\"b"}`},
		{name: "duplicate key field last wins", cfg: byID, m: msg("", `{"id":"a","id":"b"}`), kind: persistence.OpUpsert, key: "b", doc: `{"id":"b"}`},
		{name: "_deleted false is an upsert", m: msg("k", `{"_deleted":false}`), kind: persistence.OpUpsert, key: "k", doc: `{"_deleted":false}`},
		{name: "whitespace around object", m: msg("k", " \n\t{ } \r\n"), kind: persistence.OpUpsert, key: "k", doc: `{}`},

		// Keys that are missing or wrong.
		{name: "no message key", m: msg("", `{"a":1}`), kind: persistence.OpDeadLetter, reason: "no key"},
		{name: "key field missing", cfg: byID, m: msg("k", `{"a":1}`), kind: persistence.OpDeadLetter, reason: `no key: field "id" is missing`},
		{name: "nested key parent not object", cfg: nested, m: msg("", `{"customer":"x"}`), kind: persistence.OpDeadLetter, reason: `no key: field "customer.id" is missing`},
		{name: "nested key missing", cfg: nested, m: msg("", `{"customer":{}}`), kind: persistence.OpDeadLetter, reason: `no key: field "customer.id" is missing`},
		{name: "key field empty string", cfg: byID, m: msg("", `{"id":""}`), kind: persistence.OpDeadLetter, reason: `no key: field "id" is empty`},
		{name: "key field object", cfg: byID, m: msg("", `{"id":{"a":1}}`), kind: persistence.OpDeadLetter, reason: `key field "id" is object, want string or number`},
		{name: "key field array", cfg: byID, m: msg("", `{"id":[1]}`), kind: persistence.OpDeadLetter, reason: `key field "id" is array, want string or number`},
		{name: "key field bool", cfg: byID, m: msg("", `{"id":true}`), kind: persistence.OpDeadLetter, reason: `key field "id" is boolean, want string or number`},
		{name: "key field null", cfg: byID, m: msg("", `{"id":null}`), kind: persistence.OpDeadLetter, reason: `key field "id" is null, want string or number`},
		{name: "message key not UTF-8", m: brokers.Message{Position: "1", Key: []byte{0xff, 'a'}, Value: []byte(`{}`)}, kind: persistence.OpDeadLetter, reason: "message key is not valid UTF-8"},
		{name: "message key with NUL", m: brokers.Message{Position: "1", Key: []byte{'a', 0}, Value: []byte(`{}`)}, kind: persistence.OpDeadLetter, reason: "message key contains a NUL byte"},

		// Deletions.
		{name: "tombstone deletes message key", m: tomb, kind: persistence.OpDelete, key: "k1"},
		{name: "tombstone deletes message key despite key field", cfg: byID, m: tomb, kind: persistence.OpDelete, key: "k1"},
		{name: "keyed empty body is a tombstone", m: msg("k2", ""), kind: persistence.OpDelete, key: "k2"},
		{name: "tombstone without key", m: tombNoKey, kind: persistence.OpDeadLetter, reason: "no key"},
		{name: "_deleted true by message key", m: msg("k3", `{"_deleted":true,"x":1}`), kind: persistence.OpDelete, key: "k3"},
		{name: "_deleted true by field", cfg: byID, m: msg("k3", `{"id":7,"_deleted":true}`), kind: persistence.OpDelete, key: "7"},
		{name: "_deleted true without key", cfg: byID, m: msg("k3", `{"_deleted":true}`), kind: persistence.OpDeadLetter, reason: `no key: field "id" is missing`},
		{name: "_deleted string is an upsert", m: msg("k", `{"_deleted":"true"}`), kind: persistence.OpUpsert, key: "k", doc: `{"_deleted":"true"}`},

		// Debezium.
		{name: "debezium create bare", cfg: byID, m: msg("", `{"before":null,"after":{"id":1,"n":"a"},"op":"c","ts_ms":5}`), kind: persistence.OpUpsert, key: "1", doc: `{"id":1,"n":"a"}`},
		{name: "debezium update wrapped", cfg: byID, m: msg("", `{"schema":{},"payload":{"before":{"id":1},"after":{"n":"b","id":1},"op":"u"}}`), kind: persistence.OpUpsert, key: "1", doc: `{"id":1,"n":"b"}`},
		{name: "debezium snapshot read", cfg: byID, m: msg("", `{"payload":{"before":null,"after":{"id":"r1"},"op":"r"}}`), kind: persistence.OpUpsert, key: "r1", doc: `{"id":"r1"}`},
		{name: "debezium delete by before", cfg: byID, m: msg("", `{"payload":{"before":{"id":9},"after":null,"op":"d"}}`), kind: persistence.OpDelete, key: "9"},
		{name: "debezium delete bare by message key", m: msg(`{"id":9}`, `{"before":{"id":9},"after":null,"op":"d"}`), kind: persistence.OpDelete, key: `{"id":9}`},
		{name: "debezium delete null before uses message key", m: msg("mk", `{"before":null,"after":null,"op":"d"}`), kind: persistence.OpDelete, key: "mk"},
		{name: "debezium delete null before with key field", cfg: byID, m: msg("mk", `{"before":null,"after":null,"op":"d"}`), kind: persistence.OpDeadLetter, reason: `Debezium op "d": before is null, want an object`},
		{name: "debezium create null after", cfg: byID, m: msg("", `{"before":null,"after":null,"op":"c"}`), kind: persistence.OpDeadLetter, reason: `Debezium op "c": after is null, want an object`},
		{name: "debezium update after array", m: msg("k", `{"before":null,"after":[],"op":"u"}`), kind: persistence.OpDeadLetter, reason: `Debezium op "u": after is array, want an object`},
		{name: "debezium create keyed by message key", m: msg("mk", `{"before":null,"after":{"b":2,"a":1},"op":"c"}`), kind: persistence.OpUpsert, key: "mk", doc: `{"a":1,"b":2}`},
		{name: "debezium tombstone", m: msg(`{"id":9}`, ""), kind: persistence.OpDelete, key: `{"id":9}`},
		{name: "unknown op is a plain object", m: msg("k", `{"before":null,"after":null,"op":"t"}`), kind: persistence.OpUpsert, key: "k", doc: `{"after":null,"before":null,"op":"t"}`},
		{name: "op without before/after is a plain object", m: msg("k", `{"op":"d","after":null}`), kind: persistence.OpUpsert, key: "k", doc: `{"after":null,"op":"d"}`},
		{name: "payload that is not debezium is plain", m: msg("k", `{"payload":{"op":"x"}}`), kind: persistence.OpUpsert, key: "k", doc: `{"payload":{"op":"x"}}`},

		// Bodies that are not JSON objects.
		{name: "array", m: msg("k", `[1,2]`), kind: persistence.OpDeadLetter, reason: "not a JSON object: array"},
		{name: "string", m: msg("k", `"s"`), kind: persistence.OpDeadLetter, reason: "not a JSON object: string"},
		{name: "number", m: msg("k", `12`), kind: persistence.OpDeadLetter, reason: "not a JSON object: number"},
		{name: "boolean", m: msg("k", `true`), kind: persistence.OpDeadLetter, reason: "not a JSON object: boolean"},
		{name: "json null", m: msg("k", `null`), kind: persistence.OpDeadLetter, reason: "not a JSON object: null"},
		{name: "truncated", m: msg("k", `{"a":[1,2,`), kind: persistence.OpDeadLetter, reason: "invalid JSON: unexpected end of input at offset 10"},
		{name: "truncated at 12", m: msg("k", `{"order": 12`), kind: persistence.OpDeadLetter, reason: "invalid JSON: unexpected end of input in an object at offset 12"},
		{name: "not json", m: msg("k", `hello`), kind: persistence.OpDeadLetter, reason: "invalid JSON: unexpected character 'h' at offset 0"},
		{name: "trailing garbage", m: msg("k", `{} x`), kind: persistence.OpDeadLetter, reason: "invalid JSON: unexpected character 'x' after the top-level value at offset 3"},
		{name: "two values", m: msg("k", `{}{}`), kind: persistence.OpDeadLetter, reason: "invalid JSON: unexpected character '{' after the top-level value at offset 2"},
		{name: "single quotes", m: msg("k", `{'a':1}`), kind: persistence.OpDeadLetter, reason: `invalid JSON: unexpected character '\'' in an object (want a string key) at offset 1`},
		{name: "trailing comma", m: msg("k", `{"a":1,}`), kind: persistence.OpDeadLetter, reason: `invalid JSON: unexpected character '}' in an object (want a string key) at offset 7`},
		{name: "leading zero", m: msg("k", `{"a":01}`), kind: persistence.OpDeadLetter, reason: `invalid JSON: unexpected character '1' in an object (want ',' or '}') at offset 6`},
		{name: "bad number", m: msg("k", `{"a":1.}`), kind: persistence.OpDeadLetter, reason: `invalid JSON: unexpected character '}' in a number at offset 7`},
		{name: "raw control char", m: msg("k", "{\"a\":\"x\ty\"}"), kind: persistence.OpDeadLetter, reason: `invalid JSON: control character 0x09 in a string at offset 7`},
		{name: "bad escape", m: msg("k", `{"a":"\x"}`), kind: persistence.OpDeadLetter, reason: `invalid JSON: invalid escape of character 'x' in a string at offset 7`},
		{name: "bad unicode escape", m: msg("k", `{"a":"\u12g4"}`), kind: persistence.OpDeadLetter, reason: `invalid JSON: invalid \u escape in a string at offset 6`},
		{name: "invalid UTF-8", m: msg("k", "{\"a\":\"\xff\"}"), kind: persistence.OpDeadLetter, reason: `invalid JSON: invalid UTF-8 in a string at offset 6`},
		{name: "byte outside string", m: msg("k", "\x01"), kind: persistence.OpDeadLetter, reason: `invalid JSON: unexpected byte 0x01 at offset 0`},
		{name: "NUL escape", m: msg("k", `{"a":"\u0000"}`), kind: persistence.OpDeadLetter, reason: `unsupported JSON: \u0000 in a string at offset 6`},
		{name: "lone high surrogate", m: msg("k", `{"a":"\ud800x"}`), kind: persistence.OpDeadLetter, reason: `unsupported JSON: lone surrogate \ud800 at offset 6`},
		{name: "lone low surrogate", m: msg("k", `{"a":"\uDC00"}`), kind: persistence.OpDeadLetter, reason: `unsupported JSON: lone surrogate \udc00 at offset 6`},
		{name: "too deep", m: msg("k", `{"a":`+strings.Repeat("[", 1000)+strings.Repeat("]", 1000)+`}`), kind: persistence.OpDeadLetter, reason: `unsupported JSON: nesting deeper than 1000 at offset 1004`},
		{name: "empty body no key", m: msg("", ""), kind: persistence.OpDeadLetter, reason: "invalid JSON: empty body"},
		{name: "whitespace body", m: msg("k", "  "), kind: persistence.OpDeadLetter, reason: "invalid JSON: unexpected end of input at offset 2"},

		{name: "number too large for numeric", m: msg("k", `{"a":1e131071,"b":1e131072}`), kind: persistence.OpDeadLetter, reason: `unsupported JSON: number beyond PostgreSQL's numeric range (131072 integer or 16383 fraction digits) at offset 18`},
		{name: "number too precise for numeric", m: msg("k", `{"a":1e-16383,"b":1.5e-16383}`), kind: persistence.OpDeadLetter, reason: `unsupported JSON: number beyond PostgreSQL's numeric range (131072 integer or 16383 fraction digits) at offset 18`},
		{name: "long digits within numeric", m: msg("k", `{"a":`+strings.Repeat("9", 20000)+`}`), kind: persistence.OpUpsert, key: "k", doc: `{"a":` + strings.Repeat("9", 20000) + `}`},
		{name: "fraction digits beyond numeric", m: msg("k", `{"a":0.`+strings.Repeat("1", 16384)+`}`), kind: persistence.OpDeadLetter, reason: `unsupported JSON: number beyond PostgreSQL's numeric range (131072 integer or 16383 fraction digits) at offset 5`},

		// Key length.
		{name: "key at max length", cfg: byID, m: msg("", `{"id":"`+strings.Repeat("k", MaxKeyBytes)+`"}`), kind: persistence.OpUpsert, key: strings.Repeat("k", MaxKeyBytes), doc: `{"id":"` + strings.Repeat("k", MaxKeyBytes) + `"}`},
		{name: "field key too long", cfg: byID, m: msg("", `{"id":"`+strings.Repeat("k", MaxKeyBytes+1)+`"}`), kind: persistence.OpDeadLetter, reason: "key of 2049 bytes exceeds 2048 bytes"},
		{name: "message key too long", m: msg(strings.Repeat("k", 3000), `{}`), kind: persistence.OpDeadLetter, reason: "key of 3000 bytes exceeds 2048 bytes"},
		{name: "tombstone key too long", m: msg(strings.Repeat("k", 3000), ""), kind: persistence.OpDeadLetter, reason: "key of 3000 bytes exceeds 2048 bytes"},

		// Size.
		{name: "oversize", cfg: Config{MaxBytes: 50}, m: big, kind: persistence.OpDeadLetter, reason: "message of 108 bytes exceeds max_message_bytes 50"},
		{name: "exactly max", cfg: Config{MaxBytes: 108}, m: big, kind: persistence.OpUpsert, key: "k", doc: string(big.Value)},
		{name: "default max 1 MiB", m: msg("k", `"`+strings.Repeat("x", 1<<20)+`"`), kind: persistence.OpDeadLetter, reason: "message of 1048578 bytes exceeds max_message_bytes 1048576"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			op := tt.cfg.Record(tt.m)
			if op.Kind != tt.kind {
				t.Fatalf("kind = %v (reason %q), want %v", op.Kind, op.Reason, tt.kind)
			}
			if op.Position != tt.m.Position || op.MessageID != tt.m.ID {
				t.Errorf("position, id = %q, %q; want %q, %q", op.Position, op.MessageID, tt.m.Position, tt.m.ID)
			}
			switch tt.kind {
			case persistence.OpUpsert:
				if op.Key != tt.key || string(op.Doc) != tt.doc {
					t.Errorf("upsert %q %s, want %q %s", op.Key, op.Doc, tt.key, tt.doc)
				}
			case persistence.OpDelete:
				if op.Key != tt.key || op.Doc != nil {
					t.Errorf("delete %q doc %s, want %q and no doc", op.Key, op.Doc, tt.key)
				}
			case persistence.OpDeadLetter:
				if op.Reason != tt.reason {
					t.Errorf("reason = %q, want %q", op.Reason, tt.reason)
				}
				want, wantBytes := tt.m.Value, 0
				if len(want) > DefaultMaxDeadLetterBytes {
					want, wantBytes = want[:DefaultMaxDeadLetterBytes], len(want)
				}
				if !bytes.Equal(op.Payload, want) || op.PayloadBytes != wantBytes || op.MsgKey != MsgKey(tt.m.Key) || op.Key != "" {
					t.Errorf("dead letter payload of %d bytes (of %d) msgkey %q key %q; want payload = body cut at %d bytes (%d), msgkey = MsgKey(key), no key",
						len(op.Payload), op.PayloadBytes, op.MsgKey, op.Key, DefaultMaxDeadLetterBytes, wantBytes)
				}
			}
		})
	}
}

func TestCanonical(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{ "b" : [ 1 , {"z":null,"a":false} ] , "a" : "x" }`, `{"a":"x","b":[1,{"a":false,"z":null}]}`},
		{`{"n":1e400,"m":-0.000E+01,"big":123456789012345678901234567890123}`, `{"big":123456789012345678901234567890123,"m":-0.000E+01,"n":1e400}`},
		{`{"s":"\u00e9\/\"\\\b\f\n\r\t\u001F\u007f\ud83d\ude00"}`, "{\"s\":\"é/\\\"\\\\\\b\\f\\n\\r\\t\\u001f\x7f😀\"}"},
		{`{"\u0062":1,"a":2}`, `{"a":2,"b":1}`},
		{`{"a":1,"b":2,"a":3}`, `{"a":3,"b":2}`},
		{`{"é":1,"z":2,"Z":3,"":4}`, `{"":4,"Z":3,"z":2,"é":1}`},
		{`{"a":"<>&\u2028"}`, "{\"a\":\"<>&\u2028\"}"},
		{`[]`, `[]`},
		{`"x"`, `"x"`},
	}
	for _, tt := range tests {
		got, err := Canonical([]byte(tt.in))
		if err != nil {
			t.Errorf("Canonical(%s): %v", tt.in, err)
			continue
		}
		if string(got) != tt.want {
			t.Errorf("Canonical(%s) = %s, want %s", tt.in, got, tt.want)
		}
		again, err := Canonical(got)
		if err != nil || !bytes.Equal(again, got) {
			t.Errorf("Canonical(Canonical(%s)) = %s, %v; want a no-op", tt.in, again, err)
		}
	}
}

// A message the adapter rejected (a corrupt KPL aggregate) is a dead
// letter with the adapter's reason in both modes, whatever its body.
var rejected = brokers.Message{Position: "9", Key: []byte("k"), Value: []byte(`{"id":1}`), Reject: "KPL aggregate: MD5 checksum mismatch"}

func TestRecordRejected(t *testing.T) {
	op := Config{}.Record(rejected)
	if op.Kind != persistence.OpDeadLetter || op.Reason != rejected.Reject || string(op.Payload) != `{"id":1}` || op.Position != "9" || op.MsgKey != "k" {
		t.Errorf("Record(rejected) = %+v, want a dead letter with the adapter's reason", op)
	}
}

func TestRaw(t *testing.T) {
	tomb := msg("k", "")
	tomb.Tombstone = true
	tests := []struct {
		name    string
		cfg     Config
		m       brokers.Message
		kind    persistence.OpKind
		key     string
		payload string
		reason  string
	}{
		{name: "any body", m: msg("k", "not json"), kind: persistence.OpMessage, key: "k", payload: "not json"},
		{name: "binary key", m: brokers.Message{Key: []byte{0xff}, Value: []byte("x")}, kind: persistence.OpMessage, key: "\xff", payload: "x"},
		{name: "no key", m: msg("", "{}"), kind: persistence.OpMessage, key: "", payload: "{}"},
		{name: "tombstone", m: tomb, kind: persistence.OpMessage, key: "k"},
		{name: "oversize", cfg: Config{MaxBytes: 3}, m: msg("k", "abcd"), kind: persistence.OpDeadLetter, payload: "abcd", reason: "message of 4 bytes exceeds max_message_bytes 3"},
		{name: "rejected", m: rejected, kind: persistence.OpDeadLetter, payload: `{"id":1}`, reason: "KPL aggregate: MD5 checksum mismatch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			op := tt.cfg.Raw(tt.m)
			if op.Kind != tt.kind || op.Key != tt.key || string(op.Payload) != tt.payload || op.Reason != tt.reason {
				t.Errorf("Raw = %v key %q payload %q reason %q; want %v %q %q %q", op.Kind, op.Key, op.Payload, op.Reason, tt.kind, tt.key, tt.payload, tt.reason)
			}
			if op.Position != tt.m.Position || op.MessageID != tt.m.ID {
				t.Errorf("position, id = %q, %q", op.Position, op.MessageID)
			}
		})
	}
}

// Issue 10 item 6: a dead letter keeps at most MaxDeadLetterBytes of its
// body and records the whole size; its reason is cut at MaxReasonBytes.
func TestDeadLetterCut(t *testing.T) {
	body := strings.Repeat("x", 100)
	tests := []struct {
		name      string
		cfg       Config
		m         brokers.Message
		raw       bool
		payload   int // bytes kept
		fullBytes int // PayloadBytes
	}{
		{name: "oversize cut", cfg: Config{MaxBytes: 50, MaxDeadLetterBytes: 10}, m: msg("k", body), payload: 10, fullBytes: 100},
		{name: "oversize raw cut", cfg: Config{MaxBytes: 50, MaxDeadLetterBytes: 10}, m: msg("k", body), raw: true, payload: 10, fullBytes: 100},
		{name: "bad JSON cut", cfg: Config{MaxDeadLetterBytes: 7}, m: msg("k", "not json "+body), payload: 7, fullBytes: 109},
		{name: "at the cut: whole", cfg: Config{MaxBytes: 50, MaxDeadLetterBytes: 100}, m: msg("k", body), payload: 100},
		{name: "below the cut: whole", cfg: Config{MaxBytes: 50}, m: msg("k", body), payload: 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			op := tt.cfg.Record(tt.m)
			if tt.raw {
				op = tt.cfg.Raw(tt.m)
			}
			if op.Kind != persistence.OpDeadLetter {
				t.Fatalf("kind %v, want a dead letter", op.Kind)
			}
			if !bytes.Equal(op.Payload, tt.m.Value[:tt.payload]) || op.PayloadBytes != tt.fullBytes {
				t.Errorf("payload %q (PayloadBytes %d), want the first %d bytes of the body (%d)", op.Payload, op.PayloadBytes, tt.payload, tt.fullBytes)
			}
		})
	}
	m := msg("k", body)
	long := strings.Repeat("é", MaxReasonBytes) // 2 bytes each
	op := Config{MaxDeadLetterBytes: 10}.Dead(m, long)
	if len(op.Reason) > MaxReasonBytes || !strings.HasSuffix(op.Reason, "…") || !utf8.ValidString(op.Reason) {
		t.Errorf("reason of %d bytes (valid UTF-8 %v), want at most %d ending in …", len(op.Reason), utf8.ValidString(op.Reason), MaxReasonBytes)
	}
	if op.Kind != persistence.OpDeadLetter || op.Position != m.Position || op.MessageID != m.ID || op.MsgKey != "k" ||
		string(op.Payload) != body[:10] || op.PayloadBytes != 100 {
		t.Errorf("Dead = %+v", op)
	}
	if short := (Config{}).Dead(m, "short"); short.Reason != "short" || short.PayloadBytes != 0 || string(short.Payload) != body {
		t.Errorf("Dead with a short reason and a small body = %+v", short)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		cfg  Config
		want string // "" = valid
	}{
		{Config{}, ""},
		{Config{KeyField: "a.b.c", MaxBytes: 10}, ""},
		{Config{MaxBytes: -1}, "decode: max bytes -1: must not be negative"},
		{Config{MaxDeadLetterBytes: -1}, "decode: max dead-letter bytes -1: must not be negative"},
		{Config{KeyField: "a..b"}, `decode: key field "a..b": segment 2 is empty`},
		{Config{KeyField: ".a"}, `decode: key field ".a": segment 1 is empty`},
		{Config{KeyField: "a."}, `decode: key field "a.": segment 2 is empty`},
	}
	for _, tt := range tests {
		err := tt.cfg.Validate()
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("%+v.Validate() = %q, want %q", tt.cfg, got, tt.want)
		}
	}
}

func TestMsgKey(t *testing.T) {
	tests := []struct {
		key  []byte
		want string
	}{
		{nil, ""},
		{[]byte("order-1"), "order-1"},
		{[]byte{0xff, 0x00}, "base64:/wA="},
		{[]byte("a\x00b"), "base64:YQBi"},
		{[]byte("base64:abc"), "base64:YmFzZTY0OmFiYw=="},
	}
	for _, tt := range tests {
		got := MsgKey(tt.key)
		if got != tt.want {
			t.Errorf("MsgKey(%q) = %q, want %q", tt.key, got, tt.want)
		}
		back, err := KeyBytes(got)
		if err != nil || !bytes.Equal(back, tt.key) {
			t.Errorf("KeyBytes(%q) = %q, %v; want %q", got, back, err, tt.key)
		}
	}
	if _, err := KeyBytes("base64:!!"); err == nil || !strings.Contains(err.Error(), `message key "base64:!!": bad base64`) {
		t.Errorf("KeyBytes of bad base64: err = %v", err)
	}
}
