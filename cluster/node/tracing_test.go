package node

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/brokers"
	brokermem "github.com/drover-dev/drover/brokers/memory"
	"github.com/drover-dev/drover/cluster/config"
	"github.com/drover-dev/drover/cluster/tracing/tracingtest"
	"github.com/drover-dev/drover/persistence/stores"
)

// W3C trace contexts two producers sent (sampled).
const (
	traceA  = "4bf92f3577b34da6a3ce929d0e0e4736"
	traceB  = "0af7651916cd43dd8448eb211c80319c"
	parentA = "00-" + traceA + "-00f067aa0ba902b7-01"
	parentB = "00-" + traceB + "-b7ad6b7169203331-01"
)

// tracedNode runs node n1 on one memory partition holding a traced
// record, an untraced one and a traced body that is not JSON (a dead
// letter), until all three are handled; it shuts the node down (which
// flushes its spans) and returns it with the dead letter's reason.
func tracedNode(t *testing.T) (*Node, string) {
	t.Helper()
	st, err := brokermem.NewStream(brokermem.StreamConfig{Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	tp := func(v string) []brokers.Header {
		return []brokers.Header{{Key: "other", Value: []byte("x")}, {Key: "traceparent", Value: []byte(v)}}
	}
	if _, err := st.Produce("0",
		brokers.Message{Value: []byte(`{"id":1}`), Headers: tp(parentA)},
		brokers.Message{Value: []byte(`{"id":2}`)},
		brokers.Message{Value: []byte(`not json`), Headers: tp(parentB)},
	); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := parseConfig(t, memoryNodeYAML(`debug_addr: "127.0.0.1:0"`, `bind: "127.0.0.1:0"`, dir, 1), config.Options{})
	n, err := Start(t.Context(), cfg, Options{Version: "v-test",
		OpenSource: func(context.Context, config.Source, *slog.Logger) (Source, error) { return Source{Stream: st}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	deadline := time.Now().Add(20 * time.Second)
	for handled(n.Tree()) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("messages not handled in time: %+v", n.Tree())
		}
		<-time.After(10 * time.Millisecond) // polling a condition with a deadline
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := n.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	var reasons []string
	err = stores.Query(t.Context(), "sqlite:"+dir+"/d.db", `SELECT reason FROM drover_dead_letters`, nil, func(scan func(...any) error) error {
		var r string
		if err := scan(&r); err != nil {
			return err
		}
		reasons = append(reasons, r)
		return nil
	})
	if err != nil || len(reasons) != 1 {
		t.Fatalf("dead letters %q, %v; want one", reasons, err)
	}
	return n, reasons[0]
}

func handled(tr actors.Tree) int64 {
	var n int64
	for _, s := range tr.Sources {
		for _, u := range s.Units {
			n += u.Applied + u.DeadLettered
		}
	}
	return n
}

// With OTEL_EXPORTER_OTLP_ENDPOINT set, a node exports fetch, decode and
// apply spans over OTLP/gRPC to a real TraceService server: with the
// unit, positions, batch size and idempotency key, the apply span linked
// to the traces its messages carried; the dead letter names its
// message's trace.
func TestTracingExportsBatchSpans(t *testing.T) {
	for _, protocol := range []string{"grpc", "http/protobuf"} {
		t.Run(strings.ReplaceAll(protocol, "/", "-"), func(t *testing.T) {
			rcv := tracingtest.Start(t)
			endpoint := rcv.GRPCEndpoint
			if protocol != "grpc" {
				endpoint = rcv.HTTPEndpoint
			}
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
			t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-drover-test=yes")
			n, reason := tracedNode(t)
			if n.tracing == nil || n.tracing.Protocol() != protocol {
				t.Fatalf("tracing %+v, want on over %s", n.tracing, protocol)
			}
			if !strings.HasSuffix(reason, " trace_id="+traceB) {
				t.Errorf("dead letter reason %q does not end with its message's trace id", reason)
			}
			if h := rcv.Header("x-drover-test"); h != "yes" {
				t.Errorf("receiver got header x-drover-test=%q, want the one of OTEL_EXPORTER_OTLP_HEADERS", h)
			}
			checkBatchSpans(t, rcv.Spans())
		})
	}
}

func checkBatchSpans(t *testing.T, spans []tracingtest.Span) {
	t.Helper()
	byName := map[string][]tracingtest.Span{}
	for _, s := range spans {
		byName[s.Name] = append(byName[s.Name], s)
	}
	fetches, decodes, applies := byName[actors.SpanFetch], byName[actors.SpanDecode], byName[actors.SpanApply]
	if len(fetches) == 0 || len(decodes) != len(fetches) || len(applies) == 0 {
		t.Fatalf("spans %+v: want fetch, decode and apply spans", spans)
	}
	fetchIDs := map[string]string{} // span id → trace id
	for _, f := range fetches {
		fetchIDs[f.SpanID] = f.TraceID
	}
	var linked []string
	size := 0
	for _, a := range applies {
		if a.Attrs[actors.AttrUnit] != "m/0" || a.Attrs[actors.AttrSource] != "m" {
			t.Errorf("apply span attributes %v", a.Attrs)
		}
		first, last := a.Attrs[actors.AttrFirstPosition], a.Attrs[actors.AttrLastPosition]
		if want := "m/0/" + first + ".." + last; first == "" || a.Attrs[actors.AttrIdempotencyKey] != want {
			t.Errorf("apply span idempotency key %q, want %q", a.Attrs[actors.AttrIdempotencyKey], want)
		}
		if a.Attrs[actors.AttrLeaseToken] == "" || a.Attrs[actors.AttrLeaseToken] == "0" {
			t.Errorf("apply span lease token %q", a.Attrs[actors.AttrLeaseToken])
		}
		if fetchIDs[a.ParentID] != a.TraceID {
			t.Errorf("apply span's parent %s is no fetch span of its trace", a.ParentID)
		}
		if a.Resource["service.name"] != "drover" || a.Resource["service.instance.id"] != "n1" || a.Resource["service.version"] != "v-test" {
			t.Errorf("resource %v", a.Resource)
		}
		linked = append(linked, a.Links...)
		size += atoi(t, a.Attrs[actors.AttrBatchSize])
	}
	if size != 3 {
		t.Errorf("apply spans hold %d ops, want 3", size)
	}
	slices.Sort(linked)
	if want := []string{traceB, traceA}; !slices.Equal(linked, want) {
		t.Errorf("apply spans link traces %v, want %v", linked, want)
	}
	for _, d := range decodes {
		if fetchIDs[d.ParentID] != d.TraceID || d.Attrs[actors.AttrUnit] != "m/0" || d.Attrs[actors.AttrIdempotencyKeys] == "" {
			t.Errorf("decode span %+v", d)
		}
	}
	for _, f := range fetches {
		if f.Attrs[actors.AttrFirstPosition] == "" || f.Attrs[actors.AttrBatchSize] == "" {
			t.Errorf("fetch span %+v", f)
		}
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// With no OTEL_EXPORTER_OTLP_* endpoint, or with the SDK disabled, there
// is no exporter and nothing reaches the receiver; a dead letter still
// names its message's trace.
func TestTracingOffExportsNothing(t *testing.T) {
	for name, env := range map[string][2]string{
		"no-endpoint":  {"", ""},
		"sdk-disabled": {"endpoint", "true"},
	} {
		t.Run(name, func(t *testing.T) {
			rcv := tracingtest.Start(t)
			endpoint := ""
			if env[0] != "" {
				endpoint = rcv.GRPCEndpoint
			}
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
			t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
			t.Setenv("OTEL_SDK_DISABLED", env[1])
			n, reason := tracedNode(t)
			if n.tracing != nil {
				t.Fatal("a tracer provider was made with tracing off")
			}
			if got := rcv.Requests(); got != 0 {
				t.Fatalf("receiver got %d export requests with tracing off", got)
			}
			if !strings.HasSuffix(reason, " trace_id="+traceB) {
				t.Errorf("dead letter reason %q does not end with its message's trace id", reason)
			}
		})
	}
}
