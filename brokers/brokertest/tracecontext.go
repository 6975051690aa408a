package brokertest

import (
	"testing"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/tracecontext"
)

// Names of the definitions that check W3C trace context (traceparent,
// tracestate) travels with a message: drover links a batch's spans to
// the contexts its messages carry (actors/trace.go).
const (
	StreamTraceContext = "trace-context-carried"
	QueueTraceContext  = "queue-trace-context-carried"
)

const (
	testTraceID    = "4bf92f3577b34da6a3ce929d0e0e4736"
	testSpanID     = "00f067aa0ba902b7"
	testTraceState = "vendor=opaque"
)

var traceDoc = "a message sent with W3C traceparent and tracestate headers (attributes) arrives with them, and the trace context propagator continues its trace (trace id, span id, sampled, tracestate)"

// tracedMessage is a message carrying a producer's trace context.
func tracedMessage() brokers.Message {
	return brokers.Message{Key: []byte("k"), Value: []byte(`{"id":1}`), Headers: []brokers.Header{
		{Key: tracecontext.TraceParent, Value: []byte("00-" + testTraceID + "-" + testSpanID + "-01")},
		{Key: tracecontext.TraceState, Value: []byte(testTraceState)},
	}}
}

// checkTraced fails t unless m continues tracedMessage's context.
func checkTraced(t *testing.T, m brokers.Message) {
	t.Helper()
	sc := tracecontext.Extract(m)
	if !sc.IsValid() || sc.TraceID().String() != testTraceID || sc.SpanID().String() != testSpanID || !sc.IsSampled() || !sc.IsRemote() {
		t.Fatalf("trace context of %s = %+v, want trace %s span %s sampled", Headers(m), sc, testTraceID, testSpanID)
	}
	if ts := sc.TraceState().String(); ts != testTraceState {
		t.Fatalf("tracestate %q, want %q", ts, testTraceState)
	}
	if tracecontext.TraceID(m) != testTraceID {
		t.Fatalf("TraceID = %q", tracecontext.TraceID(m))
	}
}

func streamTraceContext(t *testing.T, h StreamHarness) {
	f, s, ids := newStream(t, h, 1)
	produce(t, f, ids[0], tracedMessage())
	checkTraced(t, fetchN(t, openReader(t, s, ids[0], earliest), 1, readTimeout, false)[0])
}

func queueTraceContext(t *testing.T, h QueueHarness) {
	f, q := newQueue(t, h)
	send(t, f, tracedMessage())
	r := openRecv(t, q, "slot-0")
	m := receiveN(t, r, 1, readTimeout, false)[0]
	checkTraced(t, m)
	ack(t, r, []brokers.Message{m})
}
