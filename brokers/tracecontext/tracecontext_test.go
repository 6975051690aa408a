package tracecontext

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/drover-dev/drover/brokers"
)

func TestInjectExtractRoundTrip(t *testing.T) {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ts, _ := trace.ParseTraceState("a=1,b=2")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: ts})
	hs := Inject(trace.ContextWithSpanContext(context.Background(), sc), []brokers.Header{{Key: "other", Value: []byte("x")}})
	got := Extract(brokers.Message{Headers: hs})
	if !got.IsRemote() || got.TraceID() != tid || got.SpanID() != sid || !got.IsSampled() || got.TraceState().String() != "a=1,b=2" {
		t.Fatalf("extracted %+v from %+v", got, hs)
	}
	if TraceID(brokers.Message{Headers: hs}) != tid.String() {
		t.Fatal("TraceID differs from the injected trace")
	}
	c := Carrier(hs)
	if keys := c.Keys(); len(keys) != 3 || keys[0] != "other" {
		t.Fatalf("keys %v", keys)
	}
}

func TestHeaderNamesMatchInAnyCase(t *testing.T) {
	m := brokers.Message{Headers: []brokers.Header{
		{Key: "TRACEPARENT", Value: []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")},
		{Key: "traceparent", Value: []byte("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")},
	}}
	if !Has(m.Headers) {
		t.Fatal("Has misses TRACEPARENT")
	}
	if got := TraceID(m); got != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("TraceID %q, want the first traceparent's", got)
	}
	for _, hs := range [][]brokers.Header{nil, {{Key: "traceparentx", Value: []byte("x")}}, {{Key: "traceparent", Value: []byte("garbage")}}} {
		if sc := Extract(brokers.Message{Headers: hs}); sc.IsValid() {
			t.Errorf("headers %+v gave a valid context %+v", hs, sc)
		}
	}
}
