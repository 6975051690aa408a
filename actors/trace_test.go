package actors

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/drover-dev/drover/actors/placement"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/memory"
	"github.com/drover-dev/drover/internal/clock"
	"github.com/drover-dev/drover/internal/exec"
	"github.com/drover-dev/drover/persistence"
	memstore "github.com/drover-dev/drover/persistence/memory"
)

// traceparent i is a sampled W3C context of trace i.
func traceparent(i int) (brokers.Header, trace.TraceID) {
	var id trace.TraceID
	copy(id[:], fmt.Sprintf("%016x", i+1))
	return brokers.Header{Key: "traceparent", Value: []byte(fmt.Sprintf("00-%s-00f067aa0ba902b7-01", id))}, id
}

// runTraced runs one stream partition holding msgs on a real node with a
// recording tracer until every message is applied, and returns the spans
// ended by then.
func runTraced(t *testing.T, msgs []brokers.Message, batchSize int) []sdktrace.ReadOnlySpan {
	t.Helper()
	st, _ := memory.NewStream(memory.StreamConfig{Partitions: 1})
	if _, err := st.Produce("0", msgs...); err != nil {
		t.Fatal(err)
	}
	rec := tracetest.NewSpanRecorder()
	limits := sdktrace.NewSpanLimits()
	limits.LinkCountLimit = 10 * MaxTraceLinks // the bound tested is drover's, not the SDK's (128 too)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithRawSpanLimits(limits))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	env := Env{
		Node: "n1", Clock: clock.Real{}, Rand: NewRand(1), Executor: &exec.Goroutines{}, Store: memstore.New(memstore.Config{}),
		Membership: static{[]placement.Member{{Name: "n1", State: placement.StateAlive}}},
		Tracer:     tp.Tracer("test"),
	}
	n, err := Start(env, []SourceSpec{{Name: "s", Stream: st, KeyField: "id", BatchSize: batchSize, MaxWait: 20 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ops := 0
		for _, s := range rec.Ended() {
			if s.Name() == SpanApply {
				ops += intAttr(s, AttrBatchSize)
			}
		}
		if ops >= len(msgs) {
			return rec.Ended()
		}
		if time.Now().After(deadline) {
			t.Fatalf("apply spans cover %d of %d messages", ops, len(msgs))
		}
		<-time.After(5 * time.Millisecond) // polling a condition with a deadline
	}
}

func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.Emit()
		}
	}
	return ""
}

func intAttr(s sdktrace.ReadOnlySpan, key string) int {
	var n int
	_, _ = fmt.Sscan(attr(s, key), &n)
	return n
}

func spansNamed(spans []sdktrace.ReadOnlySpan, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// A fetch whose one traced message carries a context continues that
// trace: the fetch span's parent is the producer's span, decode and apply
// are its children, and the apply span links the message's context.
func TestTraceContinuesAMessagesContext(t *testing.T) {
	h, id := traceparent(7)
	spans := runTraced(t, []brokers.Message{
		{Value: []byte(`{"id":1}`), Headers: []brokers.Header{h}},
		{Value: []byte(`{"id":2}`)},
	}, 500)
	fetch, decode, apply := spansNamed(spans, SpanFetch), spansNamed(spans, SpanDecode), spansNamed(spans, SpanApply)
	if len(fetch) != 1 || len(decode) != 1 || len(apply) != 1 {
		t.Fatalf("spans: %d fetch, %d decode, %d apply; want one each", len(fetch), len(decode), len(apply))
	}
	f, d, a := fetch[0], decode[0], apply[0]
	if f.SpanContext().TraceID() != id || f.Parent().SpanID().String() != "00f067aa0ba902b7" || !f.Parent().IsRemote() {
		t.Errorf("fetch span trace %s parent %s, want trace %s under the producer's span", f.SpanContext().TraceID(), f.Parent().SpanID(), id)
	}
	for _, c := range []sdktrace.ReadOnlySpan{d, a} {
		if c.Parent().SpanID() != f.SpanContext().SpanID() {
			t.Errorf("%s span is not a child of the fetch span", c.Name())
		}
	}
	if len(a.Links()) != 1 || a.Links()[0].SpanContext.TraceID() != id {
		t.Errorf("apply span links %+v, want the message's context", a.Links())
	}
	if got := attr(a, AttrIdempotencyKey); got != "s/0/0..1" {
		t.Errorf("apply span idempotency key %q, want s/0/0..1", got)
	}
	if attr(f, AttrFirstPosition) != "0" || attr(f, AttrLastPosition) != "1" || intAttr(f, AttrBatchSize) != 2 || intAttr(f, AttrTraced) != 1 {
		t.Errorf("fetch span attributes %v", f.Attributes())
	}
	if a.EndTime().Before(a.StartTime()) || a.StartTime().Before(d.EndTime()) {
		t.Errorf("apply span %v..%v does not follow decode %v..%v", a.StartTime(), a.EndTime(), d.StartTime(), d.EndTime())
	}
}

// Many traced messages in one fetch: a trace of drover's own, at most
// MaxTraceLinks links, every traced message counted.
func TestTraceLinksAreBounded(t *testing.T) {
	const n = MaxTraceLinks + 72
	msgs := make([]brokers.Message, n)
	for i := range msgs {
		h, _ := traceparent(i)
		msgs[i] = brokers.Message{Value: []byte(fmt.Sprintf(`{"id":%d}`, i)), Headers: []brokers.Header{h}}
	}
	spans := runTraced(t, msgs, 500)
	fetches := spansNamed(spans, SpanFetch)
	links, traced := 0, 0
	for _, f := range fetches {
		if f.Parent().IsValid() {
			t.Errorf("fetch of %d contexts has parent %s", intAttr(f, AttrTraced), f.Parent().SpanID())
		}
		if len(f.Links()) > MaxTraceLinks {
			t.Errorf("fetch span has %d links, more than %d", len(f.Links()), MaxTraceLinks)
		}
		links += len(f.Links())
		traced += intAttr(f, AttrTraced)
	}
	if traced != n {
		t.Errorf("fetch spans count %d traced messages, want %d", traced, n)
	}
	if len(fetches) == 1 && links != MaxTraceLinks {
		t.Errorf("one fetch of %d traced messages has %d links, want %d", n, links, MaxTraceLinks)
	}
	for _, a := range spansNamed(spans, SpanApply) {
		if len(a.Links()) > MaxTraceLinks {
			t.Errorf("apply span has %d links", len(a.Links()))
		}
	}
}

// With no Tracer the hooks are nil checks: no allocation per fetch,
// decode or apply (prepare itself allocates as before).
func TestTraceHooksOffAllocateNothing(t *testing.T) {
	if raceOn {
		t.Skip("the race detector adds allocations of its own: allocation counts are checked without -race")
	}
	u := &unitActor{node: &nodeEnv{env: Env{Clock: clock.Real{}}}, spec: &SourceSpec{Name: "s"}, id: "s/0"}
	job := func(context.Context) any { return nil }
	msgs := []brokers.Message{{Position: "1", Value: []byte(`{"id":1}`)}}
	pb := &pendingBatch{batch: &persistence.Batch{Ops: []persistence.Op{{Position: "1"}}}}
	r := applyResult{batch: pb, err: errors.New("x")}
	if n := testing.AllocsPerRun(100, func() {
		jobSink = u.timeFetch(job)
		u.traceApplyStart(pb)
		u.traceApplied(r)
	}); n != 0 {
		t.Errorf("fetch and apply hooks allocate %v times with tracing off", n)
	}
	fr := fetchResult{fetched: brokers.Result{Messages: msgs}}
	u.decoder.KeyField = "id"
	plain := testing.AllocsPerRun(100, func() { pbSink = u.prepare(fr.fetched) })
	hooked := testing.AllocsPerRun(100, func() { pbSink = u.tracePrepare(fr) })
	if hooked != plain {
		t.Errorf("tracePrepare allocates %v times, prepare %v: the hook adds allocations with tracing off", hooked, plain)
	}
}

// sinks keep the compiler from dropping what the hooks return
var (
	jobSink func(context.Context) any
	pbSink  *pendingBatch
)

// BenchmarkTraceHooksOff measures the hooks of one batch with tracing off.
func BenchmarkTraceHooksOff(b *testing.B) {
	u := &unitActor{node: &nodeEnv{env: Env{Clock: clock.Real{}}}, spec: &SourceSpec{Name: "s"}, id: "s/0"}
	job := func(context.Context) any { return nil }
	pb := &pendingBatch{batch: &persistence.Batch{Ops: []persistence.Op{{Position: "1"}}}}
	r := applyResult{batch: pb}
	b.ReportAllocs()
	for b.Loop() {
		jobSink = u.timeFetch(job)
		u.traceApplyStart(pb)
		u.traceApplied(r)
	}
}
