package tracing

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/drover-dev/drover/cluster/tracing/tracingtest"
)

func env(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

func TestEnabledOnlyWithAnEndpoint(t *testing.T) {
	for _, tt := range []struct {
		env  map[string]string
		want bool
	}{
		{nil, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_HEADERS": "a=b"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_SDK_DISABLED": "TRUE"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_TRACES_EXPORTER": "none"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_SDK_DISABLED": "false"}, true},
	} {
		if got := Enabled(env(tt.env)); got != tt.want {
			t.Errorf("Enabled(%v) = %v, want %v", tt.env, got, tt.want)
		}
	}
	tr, err := Start(t.Context(), Options{Getenv: env(nil)})
	if tr != nil || err != nil || tr.Tracer() != nil || tr.Shutdown(t.Context()) != nil {
		t.Fatalf("Start with no endpoint = %v, %v; want nil, nil", tr, err)
	}
}

// A variable drover cannot use is an error naming it; a header's value
// never appears in it.
func TestBadVariablesAreNamed(t *testing.T) {
	base := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317"}
	for _, tt := range []struct{ key, value string }{
		{"OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"},
		{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "thrift"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4317"},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "://x"},
		{"OTEL_EXPORTER_OTLP_TIMEOUT", "10s"},
		{"OTEL_EXPORTER_OTLP_TRACES_INSECURE", "maybe"},
		{"OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer s3cret,s3cret-without-equals"},
	} {
		e := map[string]string{}
		for k, v := range base {
			e[k] = v
		}
		e[tt.key] = tt.value
		_, err := Start(t.Context(), Options{Getenv: env(e)})
		if err == nil || !strings.Contains(err.Error(), tt.key) {
			t.Errorf("%s=%q: error %v, want one naming it", tt.key, tt.value, err)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: error %q shows a header's value", tt.key, err)
		}
	}
}

// Start exports to the endpoint of the environment, with the resource
// naming the service, node and version, and Shutdown flushes what is
// queued. OTEL_EXPORTER_OTLP_TRACES_ENDPOINT wins over the generic one.
func TestStartExportsAndShutdownFlushes(t *testing.T) {
	rcv := tracingtest.Start(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1") // nothing listens there
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", rcv.GRPCEndpoint)
	tr, err := Start(t.Context(), Options{Node: "n7", Version: "1.2.3"})
	if err != nil || tr == nil {
		t.Fatalf("Start = %v, %v", tr, err)
	}
	if tr.Protocol() != ProtocolGRPC {
		t.Errorf("protocol %q, want gRPC by default", tr.Protocol())
	}
	_, span := tr.Tracer().Start(t.Context(), "one")
	span.End()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	spans := rcv.Spans() // Shutdown returned: flushed
	if len(spans) != 1 || spans[0].Name != "one" {
		t.Fatalf("received %+v, want span one", spans)
	}
	res := spans[0].Resource
	if res["service.name"] != ServiceName || res["service.instance.id"] != "n7" || res["drover.node"] != "n7" || res["service.version"] != "1.2.3" {
		t.Errorf("resource %v", res)
	}
}

type failing struct {
	sdktrace.SpanExporter
	errs []error
}

func (f *failing) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error {
	err := f.errs[0]
	f.errs = f.errs[1:]
	return err
}

// Export failures are logged through the node's logger, once until
// exports work again, and not handed to OpenTelemetry's global handler.
func TestExportFailuresAreLoggedOnce(t *testing.T) {
	var buf bytes.Buffer
	down := errors.New("connection refused")
	r := &reporting{SpanExporter: &failing{SpanExporter: tracetest.NewInMemoryExporter(), errs: []error{down, down, nil, down}},
		log: slog.New(slog.NewTextHandler(&buf, nil))}
	for range 4 {
		if err := r.ExportSpans(t.Context(), nil); err != nil {
			t.Fatalf("ExportSpans returned %v, want nil (the failure is logged here)", err)
		}
	}
	out := buf.String()
	if n := strings.Count(out, "exporting spans fails"); n != 2 {
		t.Errorf("%d failure warnings for two runs of failures:\n%s", n, out)
	}
	if n := strings.Count(out, "exporting spans works again"); n != 1 {
		t.Errorf("%d recovery notes, want 1:\n%s", n, out)
	}
}
