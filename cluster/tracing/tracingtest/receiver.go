// Package tracingtest is an in-process OTLP trace receiver for tests: a
// real gRPC server implementing the collector's TraceService and an HTTP
// server taking OTLP/HTTP protobuf at /v1/traces, both keeping what they
// receive. It starts its servers on loopback and stops them with the test.
package tracingtest

import (
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// Span is one received span, flattened for assertions.
type Span struct {
	Name     string
	TraceID  string // hex
	SpanID   string
	ParentID string // "" for a root span
	Attrs    map[string]string
	// Links are the linked spans' trace ids (hex), in order.
	Links []string
	// Resource is the attributes of the span's resource.
	Resource map[string]string
	// Error is set when the span's status is an error.
	Error bool
}

// Receiver keeps the spans its servers received.
type Receiver struct {
	collectortrace.UnimplementedTraceServiceServer

	// GRPCEndpoint and HTTPEndpoint are URLs for
	// OTEL_EXPORTER_OTLP_ENDPOINT (http:// so that the exporter does not
	// use TLS).
	GRPCEndpoint, HTTPEndpoint string

	mu       sync.Mutex
	spans    []Span
	requests int
	headers  map[string]string // of the last request, names in lower case
	changed  chan struct{}     // closed and replaced on every request
}

// Start starts a receiver; t.Cleanup stops it.
func Start(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{changed: make(chan struct{})}
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	gs := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(gs, r)
	go func() { _ = gs.Serve(gl) }()
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(r.serveHTTP), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(hl) }()
	r.GRPCEndpoint = "http://" + gl.Addr().String()
	r.HTTPEndpoint = "http://" + hl.Addr().String()
	t.Cleanup(func() {
		gs.Stop()
		_ = hs.Close()
	})
	return r
}

// Export is the TraceService's one call.
func (r *Receiver) Export(ctx context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	h := map[string]string{}
	for k, vs := range md {
		if len(vs) > 0 {
			h[strings.ToLower(k)] = vs[0]
		}
	}
	r.keep(req, h)
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

func (r *Receiver) serveHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.Error(w, "POST /v1/traces only", http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(req.Body)
	var msg collectortrace.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(body, &msg)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h := map[string]string{}
	for k := range req.Header {
		h[strings.ToLower(k)] = req.Header.Get(k)
	}
	r.keep(&msg, h)
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (r *Receiver) keep(req *collectortrace.ExportTraceServiceRequest, headers map[string]string) {
	var got []Span
	for _, rs := range req.GetResourceSpans() {
		res := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := Span{
					Name: s.GetName(), TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
					ParentID: hex.EncodeToString(s.GetParentSpanId()), Attrs: attrs(s.GetAttributes()), Resource: res,
					Error: s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR,
				}
				for _, l := range s.GetLinks() {
					sp.Links = append(sp.Links, hex.EncodeToString(l.GetTraceId()))
				}
				got = append(got, sp)
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.spans = append(r.spans, got...)
	r.requests++
	r.headers = headers
	close(r.changed)
	r.changed = make(chan struct{})
}

// attrs flattens attributes to strings (a string array: its values joined
// by commas).
func attrs(kvs []*commonpb.KeyValue) map[string]string {
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		out[kv.GetKey()] = value(kv.GetValue())
	}
	return out
}

func value(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_ArrayValue:
		vs := make([]string, 0, len(x.ArrayValue.GetValues()))
		for _, e := range x.ArrayValue.GetValues() {
			vs = append(vs, value(e))
		}
		return strings.Join(vs, ",")
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_BoolValue:
		if x.BoolValue {
			return "true"
		}
		return "false"
	}
	return v.GetStringValue()
}

// Spans returns what was received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Header is the value of header (gRPC metadata or HTTP header) name in
// the last export request, "" when none.
func (r *Receiver) Header(name string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.headers[strings.ToLower(name)]
}

// Requests counts the export requests received.
func (r *Receiver) Requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests
}

// WaitFor waits until ok holds for the spans received, or fails t after d.
func (r *Receiver) WaitFor(t testing.TB, d time.Duration, what string, ok func([]Span) bool) []Span {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		spans, changed := append([]Span(nil), r.spans...), r.changed
		r.mu.Unlock()
		if ok(spans) {
			return spans
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("OTLP receiver: no %s within %v; got %d spans: %+v", what, d, len(spans), spans)
			return nil
		}
	}
}
