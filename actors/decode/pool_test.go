package decode

import (
	"strings"
	"testing"

	"github.com/drover-dev/drover/persistence"
)

// TestRecordReusesParsersCleanly: Record takes its parser from a pool, so
// one message's parse must leave nothing that changes the next one's
// outcome: a parse that failed deep inside a document (its nesting count
// left high), a large document (its arenas left long), a document with
// escaped names (the canonical scratch left full). Each message of the
// sequence must decode as it does alone, on a fresh parser (Canonical).
func TestRecordReusesParsersCleanly(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	cfg := Config{KeyField: "id"}
	seq := []struct {
		body string
		ok   bool
	}{
		{`{"id":"a","x":` + deep(maxDepth+1) + `}`, false}, // fails at depth 1001
		{`{"id":"b","x":` + deep(maxDepth-1) + `}`, true},  // 1000 deep with the object: fine
		{`{"id":"c","x":` + deep(maxDepth+5), false},       // fails, unclosed
		{`{"id":"d","x":` + deep(maxDepth-1) + `}`, true},
		{`{"id":"e","big":[` + strings.Repeat(`{"z":1,"a":2},`, 2000) + `0]}`, true},
		{`{"\u0062":1,"id":"f","a":{"y":1,"\u0078":2}}`, true},
		{`{"id":"g","b":1,"a":2}`, true},
		{`{"id":"h",`, false},
		{`{"id":"i","s":"\u00e9\n"}`, true},
	}
	for round := range 3 {
		for i, s := range seq {
			op := cfg.Record(msg("k", s.body))
			if !s.ok {
				if op.Kind != persistence.OpDeadLetter {
					t.Fatalf("round %d, message %d: kind %v, want a dead letter", round, i, op.Kind)
				}
				continue
			}
			if op.Kind != persistence.OpUpsert {
				t.Fatalf("round %d, message %d: kind %v (%s), want an upsert", round, i, op.Kind, op.Reason)
			}
			want, err := Canonical([]byte(s.body))
			if err != nil {
				t.Fatal(err)
			}
			if string(op.Doc) != string(want) {
				t.Fatalf("round %d, message %d: doc\n%.200s\nwant\n%.200s", round, i, op.Doc, want)
			}
		}
	}
}

// TestPooledParserDropsTheMessage: a parser goes back to the pool holding
// no reference to the message it parsed.
func TestPooledParserDropsTheMessage(t *testing.T) {
	p := getParser()
	if err := p.parse([]byte(`{"b":{"y":1,"x":2},"a":"\u0041"}`)); err != nil {
		t.Fatal(err)
	}
	_ = p.canonical(nil, 0)
	putParser(p)
	if p.src != nil {
		t.Fatal("the pooled parser still holds its source")
	}
	for i, m := range p.members[:cap(p.members)] {
		if m.name != nil {
			t.Fatalf("the pooled parser's member %d still holds a name", i)
		}
	}
}
