package decode

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/persistence"
)

// decodeStd decodes a JSON document with encoding/json, numbers as written.
func decodeStd(t *testing.T, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("encoding/json cannot decode %q: %v", b, err)
	}
	return v
}

func FuzzRecord(f *testing.F) {
	seeds := []string{
		`{"id":1,"a":"b"}`, `{"id":"x","_deleted":true}`, `[1]`, `null`, `"s"`, ``, `{`, `{"a":1e400}`,
		`{"payload":{"before":{"id":1},"after":null,"op":"d"}}`, `{"before":null,"after":{"id":2},"op":"c"}`,
		`{"a":"\u00e9\ud83d\ude00\n","a":2}`, `{"a":"\u0000"}`, `{"a":"\ud800"}`, `{"customer":{"id":3}}`,
		"{\"a\":\"\xff\"}", `{"id":[]}`, ` {} `, `{"b":{"d":1,"c":[{"z":1,"y":2}]}}`,
	}
	for i, s := range seeds {
		f.Add([]byte("key"), []byte(s), i%3 == 0, uint8(i%4))
	}
	f.Fuzz(func(t *testing.T, key, value []byte, tombstone bool, cfgSel uint8) {
		cfg := []Config{{}, {KeyField: "id"}, {KeyField: "customer.id"}, {MaxBytes: 64}}[cfgSel%4]
		m := brokers.Message{Position: "5", ID: "m5", Key: key, Value: value, Tombstone: tombstone}
		op := cfg.Record(m)
		if op.Position != "5" || op.MessageID != "m5" {
			t.Fatalf("position/id not carried: %+v", op)
		}
		switch op.Kind {
		case persistence.OpUpsert:
			if op.Key == "" || !utf8.ValidString(op.Key) || strings.IndexByte(op.Key, 0) >= 0 {
				t.Fatalf("upsert key %q is not storable text", op.Key)
			}
			if !json.Valid(op.Doc) || op.Doc[0] != '{' {
				t.Fatalf("upsert doc %q is not a JSON object", op.Doc)
			}
			// what DocChecked promises a store, which then skips its checks
			var compact bytes.Buffer
			if err := json.Compact(&compact, op.Doc); err != nil || !bytes.Equal(compact.Bytes(), op.Doc) || !op.DocChecked {
				t.Fatalf("upsert doc %q: DocChecked %v, compact form %q", op.Doc, op.DocChecked, compact.Bytes())
			}
			again, err := Canonical(op.Doc)
			if err != nil || !bytes.Equal(again, op.Doc) {
				t.Fatalf("re-canonicalising %q gave %q, %v", op.Doc, again, err)
			}
			if op.Reason != "" || op.Payload != nil {
				t.Fatalf("upsert carries dead-letter fields: %+v", op)
			}
		case persistence.OpDelete:
			if op.Key == "" || op.Doc != nil || op.Reason != "" || op.DocChecked {
				t.Fatalf("bad delete %+v", op)
			}
		case persistence.OpDeadLetter:
			if op.Reason == "" || !bytes.Equal(op.Payload, value) || op.Key != "" || op.Doc != nil || op.DocChecked {
				t.Fatalf("bad dead letter %+v", op)
			}
		default:
			t.Fatalf("kind %v", op.Kind)
		}

		// Differential check of the parser against encoding/json.
		if len(value) == 0 {
			return
		}
		canon, err := Canonical(value)
		stdOK := json.Valid(value) && utf8.Valid(value)
		switch {
		case err == nil && !stdOK:
			t.Fatalf("Canonical accepted %q, which encoding/json refuses", value)
		case err != nil && stdOK && !strings.HasPrefix(err.Error(), "unsupported JSON: "):
			t.Fatalf("Canonical refused valid JSON %q: %v", value, err)
		case err != nil && !strings.HasPrefix(err.Error(), "invalid JSON: ") && !strings.HasPrefix(err.Error(), "unsupported JSON: "):
			// (Invalid JSON may be reported as unsupported when the
			// unsupported part comes first.)
			t.Fatalf("Canonical error %q for %q has no known prefix", err, value)
		case err == nil:
			// Same value as encoding/json sees (which also keeps the
			// last of duplicated names).
			if !reflect.DeepEqual(decodeStd(t, canon), decodeStd(t, value)) {
				t.Fatalf("Canonical(%q) = %q changes the value", value, canon)
			}
			if bytes.ContainsAny(canon, " \n\t\r") && !json.Valid(bytes.TrimSpace(canon)) {
				t.Fatalf("canonical form %q has whitespace outside strings", canon)
			}
		}
	})
}
