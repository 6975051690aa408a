package actors

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/tracecontext"
	"github.com/drover-dev/drover/persistence"
)

// ---- OpenTelemetry spans of a unit's batches ----
//
// With Env.Tracer set, every fetch that returned messages becomes a trace
// of its own: a drover.fetch span (the broker call), a drover.decode span
// (messages into batches) and one drover.apply span per store call of
// each batch (the fenced apply; a retry is a span of its own), the latter
// two children of the fetch span. The spans are made after the fact with
// the times the unit's clock gave, so the hooks below add nothing to the
// jobs, and nothing at all with no Tracer: each is one nil check, no
// allocation (TestTraceHooksOffAllocateNothing).
//
// The W3C trace contexts the messages carry (traceparent, tracestate in
// their headers: brokers/tracecontext) become links, at most MaxTraceLinks per
// fetch: of the fetch span, and of each apply span for the messages of its
// batch. When every traced message of a fetch carries one and the same
// context (a single message, typically), the fetch span continues that
// trace: it is the parent.

// MaxTraceLinks bounds the span links of one fetch.
const MaxTraceLinks = 128

// Span names and attribute keys (README "Tracing").
const (
	SpanFetch  = "drover.fetch"
	SpanDecode = "drover.decode"
	SpanApply  = "drover.apply"

	AttrSource          = "drover.source"
	AttrUnit            = "drover.unit"
	AttrFirstPosition   = "drover.position.first"
	AttrLastPosition    = "drover.position.last"
	AttrBatchSize       = "drover.batch.size"
	AttrIdempotencyKey  = "drover.idempotency_key"
	AttrIdempotencyKeys = "drover.idempotency_keys"
	AttrTraced          = "drover.messages.traced"
	AttrDeadLetters     = "drover.dead_letters"
	AttrLeaseToken      = "drover.lease.token"
	AttrAlreadyApplied  = "drover.already_applied"
)

// spanTimes is when a job ran, by the node's clock; zero without tracing.
type spanTimes struct{ start, end time.Time }

// batchTrace is what a fetch's apply spans need: the fetch span's context
// (their parent), the message contexts by position (their links), and
// when the store call in flight began.
type batchTrace struct {
	parent     context.Context
	links      map[string]trace.SpanContext
	applyStart time.Time
}

// timeFetch wraps a fetch job so that its result says when it ran; with no
// Tracer it is the job itself.
func (u *unitActor) timeFetch(job func(context.Context) any) func(context.Context) any {
	if u.node.env.Tracer == nil {
		return job
	}
	clk := u.node.env.Clock
	return func(c context.Context) any {
		start := clk.Now()
		r := job(c).(fetchResult)
		r.span = spanTimes{start: start, end: clk.Now()}
		return r
	}
}

// tracePrepare is prepare, and with a Tracer the fetch and decode spans of
// a fetch that returned messages.
func (u *unitActor) tracePrepare(r fetchResult) *pendingBatch {
	tr := u.node.env.Tracer
	if tr == nil || len(r.fetched.Messages) == 0 {
		return u.prepare(r.fetched)
	}
	start := u.now()
	pb := u.prepare(r.fetched)
	end := u.now()

	msgs := r.fetched.Messages
	links, byPos, traced := messageLinks(msgs)
	ctx := context.Background()
	if sc, ok := onlyContext(links); ok {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	common := []attribute.KeyValue{
		attribute.String(AttrSource, u.spec.Name),
		attribute.String(AttrUnit, u.id),
		attribute.String(AttrFirstPosition, msgs[0].Position),
		attribute.String(AttrLastPosition, msgs[len(msgs)-1].Position),
		attribute.Int(AttrBatchSize, len(msgs)),
	}
	var keys []string
	dead := 0
	if pb != nil {
		for _, b := range append([]*persistence.Batch{pb.batch}, pb.rest...) {
			if len(b.Ops) > 0 {
				keys = append(keys, b.IdempotencyKey())
			}
			for _, op := range b.Ops {
				if op.Kind == persistence.OpDeadLetter {
					dead++
				}
			}
		}
	}
	if len(keys) > 0 {
		common = append(common, attribute.StringSlice(AttrIdempotencyKeys, keys))
	}
	ctx, fetch := tr.Start(ctx, SpanFetch, trace.WithTimestamp(r.span.start), trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithLinks(links...), trace.WithAttributes(common...), trace.WithAttributes(attribute.Int(AttrTraced, traced)))
	_, decode := tr.Start(ctx, SpanDecode, trace.WithTimestamp(start),
		trace.WithAttributes(common...), trace.WithAttributes(attribute.Int(AttrDeadLetters, dead)))
	decode.End(trace.WithTimestamp(end))
	fetch.End(trace.WithTimestamp(r.span.end))
	if pb != nil {
		pb.trace = &batchTrace{parent: ctx, links: byPos}
	}
	return pb
}

// messageLinks are the links to the contexts msgs carry (at most
// MaxTraceLinks, in message order), the same by position, and how many
// messages carry one (beyond the bound too).
func messageLinks(msgs []brokers.Message) ([]trace.Link, map[string]trace.SpanContext, int) {
	var links []trace.Link
	var byPos map[string]trace.SpanContext
	traced := 0
	for _, m := range msgs {
		sc := tracecontext.Extract(m) // no allocation for a message without a traceparent
		if !sc.IsValid() {
			continue
		}
		traced++
		if len(links) == MaxTraceLinks {
			continue
		}
		if byPos == nil {
			byPos = map[string]trace.SpanContext{}
		}
		links = append(links, trace.Link{SpanContext: sc})
		byPos[m.Position] = sc
	}
	return links, byPos, traced
}

// onlyContext is the one span context every link names, if they all name
// the same.
func onlyContext(links []trace.Link) (trace.SpanContext, bool) {
	if len(links) == 0 {
		return trace.SpanContext{}, false
	}
	sc := links[0].SpanContext
	for _, l := range links[1:] {
		if !l.SpanContext.Equal(sc) {
			return trace.SpanContext{}, false
		}
	}
	return sc, true
}

// traceApplyStart notes when the batch in hand goes to the store.
func (u *unitActor) traceApplyStart(pb *pendingBatch) {
	if pb.trace != nil {
		pb.trace.applyStart = u.now()
	}
}

// traceApplied ends the apply span of the store call r answers.
func (u *unitActor) traceApplied(r applyResult) {
	pb := r.batch
	if pb == nil || pb.trace == nil || pb.batch == nil || len(pb.batch.Ops) == 0 {
		return
	}
	bt, b := pb.trace, pb.batch
	var links []trace.Link
	for _, op := range b.Ops {
		if sc, ok := bt.links[op.Position]; ok {
			links = append(links, trace.Link{SpanContext: sc})
		}
	}
	_, span := u.node.env.Tracer.Start(bt.parent, SpanApply, trace.WithTimestamp(bt.applyStart), trace.WithSpanKind(trace.SpanKindClient),
		trace.WithLinks(links...), trace.WithAttributes(
			attribute.String(AttrSource, u.spec.Name),
			attribute.String(AttrUnit, u.id),
			attribute.String(AttrFirstPosition, b.Ops[0].Position),
			attribute.String(AttrLastPosition, b.Ops[len(b.Ops)-1].Position),
			attribute.Int(AttrBatchSize, len(b.Ops)),
			attribute.String(AttrIdempotencyKey, b.IdempotencyKey()),
			attribute.Int64(AttrLeaseToken, b.Lease.Token),
		))
	if r.already {
		span.SetAttributes(attribute.Bool(AttrAlreadyApplied, true))
	}
	if r.err != nil {
		span.SetStatus(codes.Error, r.err.Error())
	}
	span.End(trace.WithTimestamp(u.now()))
}
