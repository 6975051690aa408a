package awstest

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"
)

// This file holds what the SQS and Kinesis test fixtures share: fresh
// names, a proxy per fixture and the faults brokertest injects through it.

// callTimeout bounds one call a fixture makes to prepare or clean up.
const callTimeout = 15 * time.Second

var nameSeq atomic.Int64

// Name returns a fresh name for a queue or stream: "drover-PID-N", unique
// among the test binaries that share one emulator.
func Name() string { return fmt.Sprintf("drover-%d-%d", os.Getpid(), nameSeq.Add(1)) }

// CallContext bounds one call a fixture makes to prepare or clean up.
func CallContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), callTimeout)
}

// CleanupDelete deletes what a fixture made when t ends; a failure is
// logged as "delete WHAT: err".
func CleanupDelete(t testing.TB, what string, del func(ctx context.Context) error) {
	t.Cleanup(func() {
		ctx, cancel := CallContext()
		defer cancel()
		if err := del(ctx); err != nil {
			t.Logf("delete %s: %v", what, err)
		}
	})
}

// Faults is the part of a fixture that puts the adapter under test behind
// a proxy of its own (StartProxy): embedded, it gives the fixture
// brokertest's ServerRestarter and ConnectionCutter.
type Faults struct {
	Proxy *Proxy
}

// StartProxy starts a proxy to endpoint that t's cleanup closes.
func StartProxy(t testing.TB, endpoint string) Faults {
	t.Helper()
	p, err := NewProxy(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return Faults{Proxy: p}
}

// StopServer stops the proxy: the adapter meets a server that is down.
func (f Faults) StopServer(t *testing.T) { f.Proxy.Stop() }

// StartServer starts the proxy again on its port.
func (f Faults) StartServer(t *testing.T) {
	if err := f.Proxy.Start(); err != nil {
		t.Fatal(err)
	}
}

// CutConnections cuts the adapter's connections.
func (f Faults) CutConnections(t *testing.T) { f.Proxy.Cut() }

// Open opens an adapter's stream or queue with a bounded context, fails t
// when it cannot (as "WHAT: err") and closes it when t ends.
func Open[T interface{ Close() error }](t testing.TB, what string, open func(ctx context.Context) (T, error)) T {
	t.Helper()
	ctx, cancel := CallContext()
	defer cancel()
	c, err := open(ctx)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}
