// Package tracecontext reads W3C trace context (traceparent, tracestate) out of
// the headers of a broker message, through OpenTelemetry's TraceContext
// propagator. It is what the runtime links a batch's spans to and what a
// dead letter records. It starts nothing and keeps no state.
package tracecontext

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/drover-dev/drover/brokers"
)

// Header names of W3C trace context.
const (
	TraceParent = "traceparent"
	TraceState  = "tracestate"
)

// Carrier is a message's headers as an OpenTelemetry TextMapCarrier.
// Names match without regard to case (a NATS or HTTP producer may write
// "Traceparent"); Get returns the first value of a name. Set appends.
type Carrier []brokers.Header

var _ propagation.TextMapCarrier = (*Carrier)(nil)

// Get returns the first value of header key, "" when there is none.
func (c *Carrier) Get(key string) string {
	for _, h := range *c {
		if strings.EqualFold(h.Key, key) {
			return string(h.Value)
		}
	}
	return ""
}

// Set appends a header.
func (c *Carrier) Set(key, value string) {
	*c = append(*c, brokers.Header{Key: key, Value: []byte(value)})
}

// Keys lists the header names in their order.
func (c *Carrier) Keys() []string {
	ks := make([]string, 0, len(*c))
	for _, h := range *c {
		ks = append(ks, h.Key)
	}
	return ks
}

var propagator = propagation.TraceContext{}

// Has reports whether headers carry a traceparent: the cheap test before
// Extract, which allocates.
func Has(headers []brokers.Header) bool {
	for _, h := range headers {
		if len(h.Key) == len(TraceParent) && strings.EqualFold(h.Key, TraceParent) {
			return true
		}
	}
	return false
}

// Extract returns the remote span context a message carries; not valid
// (SpanContext.IsValid false) when it carries none or a malformed one.
func Extract(m brokers.Message) trace.SpanContext {
	if !Has(m.Headers) {
		return trace.SpanContext{}
	}
	c := Carrier(m.Headers)
	return trace.SpanContextFromContext(propagator.Extract(context.Background(), &c))
}

// Inject writes the span context of ctx into headers as traceparent (and
// tracestate), for producers and tests.
func Inject(ctx context.Context, headers []brokers.Header) []brokers.Header {
	c := Carrier(headers)
	propagator.Inject(ctx, &c)
	return c
}

// TraceID is the hex trace id a message carries, "" when none.
func TraceID(m brokers.Message) string {
	if sc := Extract(m); sc.IsValid() {
		return sc.TraceID().String()
	}
	return ""
}
