// Package tracing sets up a node's OpenTelemetry tracing from the standard
// OTEL_EXPORTER_OTLP_* environment variables: off (no exporter, no
// provider, nothing on the hot path) unless an endpoint is set; then an
// OTLP exporter (gRPC by default, http/protobuf when the protocol variable
// says so) behind the SDK's batch span processor. Start's caller owns the
// result and calls Shutdown when the node stops, which flushes what is
// still queued.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// ServiceName is the service.name of drover's spans, unless
// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES says otherwise.
const ServiceName = "drover"

// Protocols of OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL that drover speaks.
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http/protobuf"
)

// Options are what the spans' resource names.
type Options struct {
	Node    string // service.instance.id and drover.node
	Version string // service.version
	// Logger receives export failures (once, and once when exports work
	// again); nil discards.
	Logger *slog.Logger
	// Getenv reads the environment; nil means os.Getenv. The exporter
	// itself reads the process environment (the OpenTelemetry SDK).
	Getenv func(string) string
}

// Tracing is a node's tracer provider and exporter.
type Tracing struct {
	provider *sdktrace.TracerProvider
	protocol string
}

// Enabled reports whether the environment asks for traces: an OTLP
// endpoint is set (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
// OTEL_EXPORTER_OTLP_ENDPOINT), and neither OTEL_SDK_DISABLED=true nor
// OTEL_TRACES_EXPORTER=none turns the SDK off.
func Enabled(getenv func(string) string) bool {
	if getenv == nil {
		getenv = os.Getenv
	}
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") ||
		strings.EqualFold(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")), "none") {
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
}

// Start returns the node's tracing, or nil (and no error) when the
// environment does not ask for it (Enabled). A variable drover cannot use
// is an error naming it (never its value: headers carry credentials).
func Start(ctx context.Context, opt Options) (*Tracing, error) {
	getenv := opt.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if !Enabled(getenv) {
		return nil, nil
	}
	protocol, err := check(getenv)
	if err != nil {
		return nil, err
	}
	var exp sdktrace.SpanExporter
	switch protocol {
	case ProtocolHTTP:
		exp, err = otlptracehttp.New(ctx)
	default:
		exp, err = otlptracegrpc.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP %s exporter: %w", protocol, err)
	}
	res, err := resource.New(ctx,
		resource.WithTelemetrySDK(),
		resource.WithAttributes(
			attribute.String("service.name", ServiceName),
			attribute.String("service.version", opt.Version),
			attribute.String("service.instance.id", opt.Node),
			attribute.String("drover.node", opt.Node),
		),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES win
	)
	if err != nil && res == nil {
		_ = exp.Shutdown(ctx)
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	log := opt.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(&reporting{SpanExporter: exp, log: log}),
		sdktrace.WithResource(res),
	)
	return &Tracing{provider: p, protocol: protocol}, nil
}

// Tracer is the tracer the node's actors use; nil on a nil Tracing (off).
func (t *Tracing) Tracer() trace.Tracer {
	if t == nil {
		return nil
	}
	return t.provider.Tracer("github.com/drover-dev/drover/actors")
}

// Protocol is the OTLP protocol in use.
func (t *Tracing) Protocol() string { return t.protocol }

// Shutdown exports the spans still queued and closes the exporter, within
// ctx. A nil Tracing has nothing to do.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.provider.Shutdown(ctx)
}

// check validates the variables the exporters read (they ignore a value
// they cannot parse, silently) and returns the protocol.
func check(getenv func(string) string) (string, error) {
	protocol := ProtocolGRPC
	for _, name := range []string{"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
		switch v := strings.TrimSpace(getenv(name)); v {
		case "":
		case ProtocolGRPC, ProtocolHTTP:
			protocol = v
		default:
			return "", fmt.Errorf("tracing: %s: %q is not %q or %q", name, v, ProtocolGRPC, ProtocolHTTP)
		}
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		v := getenv(name)
		if v == "" {
			continue
		}
		u, err := url.Parse(v)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			// The value may carry credentials: say what is wrong with
			// it, never the value (a parsed URL with its password
			// masked at most).
			got := "a value that is not a URL"
			if err == nil {
				got = fmt.Sprintf("scheme %q, host %q", u.Scheme, u.Host)
				if u.User != nil {
					got = fmt.Sprintf("%q", u.Redacted())
				}
			}
			return "", fmt.Errorf("tracing: %s: want an http:// or https:// URL such as http://collector:4317, got %s", name, got)
		}
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"} {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			if ms, err := strconv.Atoi(v); err != nil || ms < 0 {
				return "", fmt.Errorf("tracing: %s: want milliseconds (an integer ≥ 0), got %q", name, v)
			}
		}
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_INSECURE", "OTEL_EXPORTER_OTLP_TRACES_INSECURE"} {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			if _, err := strconv.ParseBool(v); err != nil {
				return "", fmt.Errorf("tracing: %s: want true or false, got %q", name, v)
			}
		}
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"} {
		for i, kv := range strings.Split(getenv(name), ",") {
			if strings.TrimSpace(kv) == "" {
				continue
			}
			if k, _, ok := strings.Cut(kv, "="); !ok || strings.TrimSpace(k) == "" {
				// the value is not printed: it may hold a credential
				return "", fmt.Errorf("tracing: %s: entry %d is not key=value", name, i+1)
			}
		}
	}
	return protocol, nil
}

// reporting logs the exporter's failures through the node's logger
// instead of OpenTelemetry's global error handler: a warning when exports
// start failing, a note when they work again.
type reporting struct {
	sdktrace.SpanExporter
	log     *slog.Logger
	failing atomic.Bool
}

func (r *reporting) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := r.SpanExporter.ExportSpans(ctx, spans)
	switch {
	case err != nil && !errors.Is(err, context.Canceled):
		if r.failing.CompareAndSwap(false, true) {
			r.log.Warn("tracing: exporting spans fails; spans are dropped until it works again", "error", err)
		}
	case err == nil && r.failing.CompareAndSwap(true, false):
		r.log.Info("tracing: exporting spans works again")
	}
	return nil
}
