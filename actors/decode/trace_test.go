package decode

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/persistence"
)

// A dead letter of a message carrying a W3C traceparent ends its reason
// with the trace id, kept whole when the reason is cut; a message with
// none, or a malformed one, keeps its reason as it was.
func TestDeadLetterRecordsTraceID(t *testing.T) {
	const id = "4bf92f3577b34da6a3ce929d0e0e4736"
	traced := func(key, v string) brokers.Message {
		m := msg("k", "not json")
		m.Headers = []brokers.Header{{Key: "a", Value: []byte("b")}, {Key: key, Value: []byte(v)}}
		return m
	}
	valid := "00-" + id + "-00f067aa0ba902b7-01"
	for _, tt := range []struct {
		name string
		m    brokers.Message
		want string // suffix of the reason
	}{
		{"traceparent", traced("traceparent", valid), " trace_id=" + id},
		{"header name in another case", traced("Traceparent", valid), " trace_id=" + id},
		{"malformed traceparent", traced("traceparent", "00-xyz-01"), "offset 1"},
		{"all-zero trace id", traced("traceparent", "00-00000000000000000000000000000000-00f067aa0ba902b7-01"), "offset 1"},
		{"no traceparent", msg("k", "not json"), "offset 1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			op := Config{}.Record(tt.m)
			if op.Kind != persistence.OpDeadLetter || !strings.HasPrefix(op.Reason, "invalid JSON") || !strings.HasSuffix(op.Reason, tt.want) {
				t.Errorf("reason %q, want an invalid-JSON reason ending %q", op.Reason, tt.want)
			}
		})
	}
	op := Config{}.Dead(traced("traceparent", valid), strings.Repeat("é", MaxReasonBytes))
	if len(op.Reason) > MaxReasonBytes || !strings.HasSuffix(op.Reason, "… trace_id="+id) || !utf8.ValidString(op.Reason) {
		t.Errorf("cut reason of %d bytes ends %q, want at most %d ending in '… trace_id=%s'", len(op.Reason), op.Reason[len(op.Reason)-50:], MaxReasonBytes, id)
	}
	if ReasonTraceID(op.Reason) != id || ReasonWithTraceID(op.Reason, id) != op.Reason {
		t.Errorf("ReasonTraceID(%q) = %q; adding the id again changes the reason", op.Reason[len(op.Reason)-50:], ReasonTraceID(op.Reason))
	}
	for _, r := range []string{"", "no key", "x trace_id=" + id[:31], "x trace_id=" + strings.ToUpper(id), "x trace_id=" + id + " more"} {
		if got := ReasonTraceID(r); got != "" {
			t.Errorf("ReasonTraceID(%q) = %q, want none", r, got)
		}
	}
	if got := ReasonWithTraceID("handler: bad", id); got != "handler: bad trace_id="+id {
		t.Errorf("ReasonWithTraceID = %q", got)
	}
}
