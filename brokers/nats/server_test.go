package nats

import (
	"context"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/testserver"
)

// testServer is the NATS server of one test: an embedded nats-server with
// JetStream (it can be stopped, started again on the same port with the
// same store, and made to drop its connections), or the external server
// DROVER_TEST_NATS_URL names.
type testServer struct {
	url      string
	external bool

	mu   sync.Mutex
	opts server.Options
	srv  *server.Server // nil while stopped
}

var names atomic.Int64

// uniqueName returns a stream or subject name no other test of this run
// (or, with an external server, of another run) uses.
func uniqueName(prefix string) string {
	return fmt.Sprintf("%s%d_%d", prefix, os.Getpid(), names.Add(1))
}

// startServer returns the test's server. It is shut down in t.Cleanup.
func startServer(t testing.TB) *testServer {
	t.Helper()
	if u := os.Getenv("DROVER_TEST_NATS_URL"); u != "" {
		return &testServer{url: u, external: true}
	}
	ts := &testServer{opts: server.Options{
		Host:      "127.0.0.1",
		Port:      -1,
		JetStream: true,
		StoreDir:  t.TempDir(),
		NoLog:     true,
		NoSigs:    true,
	}}
	if err := ts.start(); err != nil {
		testserver.SkipOrFail(t, fmt.Sprintf("no NATS server: DROVER_TEST_NATS_URL is not set and the embedded server did not start: %v", err))
	}
	ts.url = ts.srv.ClientURL()
	// Later starts reuse the port the first one got.
	ts.opts.Port = ts.srv.Addr().(*net.TCPAddr).Port
	t.Cleanup(ts.shutdown)
	return ts
}

func (ts *testServer) start() error {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	opts := ts.opts
	s, err := server.NewServer(&opts)
	if err != nil {
		return err
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		s.WaitForShutdown()
		return fmt.Errorf("not ready for connections after 10s")
	}
	ts.srv = s
	return nil
}

func (ts *testServer) shutdown() {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.srv != nil {
		ts.srv.Shutdown()
		ts.srv.WaitForShutdown()
		ts.srv = nil
	}
}

// StopServer shuts the embedded server down.
func (ts *testServer) StopServer(t *testing.T) {
	t.Helper()
	ts.shutdown()
}

// StartServer starts the embedded server again on the same port with the
// same store, retrying while the port is not free yet.
func (ts *testServer) StartServer(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := ts.start()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("restart the NATS server: %v", err)
		}
		<-time.After(50 * time.Millisecond)
	}
}

// CutConnections makes the server drop every client connection.
func (ts *testServer) CutConnections(t *testing.T) {
	t.Helper()
	ts.mu.Lock()
	defer ts.mu.Unlock()
	cz, err := ts.srv.Connz(&server.ConnzOptions{})
	if err != nil {
		t.Fatalf("connz: %v", err)
	}
	for _, ci := range cz.Conns {
		if err := ts.srv.DisconnectClientByID(ci.Cid); err != nil {
			t.Logf("disconnect client %d: %v", ci.Cid, err)
		}
	}
	if len(cz.Conns) == 0 {
		t.Fatal("cut connections: the server has none")
	}
}

// client connects a plain client (the tests' producer and inspector).
func (ts *testServer) client(t testing.TB) (*natsgo.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := natsgo.Connect(ts.url,
		natsgo.Name("drover-test-producer"),
		natsgo.ReconnectWait(50*time.Millisecond),
		natsgo.MaxReconnects(-1),
	)
	if err != nil {
		testserver.SkipOrFail(t, fmt.Sprintf("connect to NATS at %s: %v", ts.url, err))
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// connConfig is the adapter's connection config for this server, with
// quick reconnects.
func (ts *testServer) connConfig() ConnConfig {
	return ConnConfig{URLs: []string{ts.url}, ReconnectWait: 50 * time.Millisecond, Name: "drover-test"}
}

// createStream creates a stream on the server and deletes it in t.Cleanup
// (with an external server; an embedded one is thrown away whole).
func (ts *testServer) createStream(t *testing.T, js jetstream.JetStream, cfg jetstream.StreamConfig) jetstream.Stream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.CreateStream(ctx, cfg)
	if err != nil {
		t.Fatalf("create stream %s: %v", cfg.Name, err)
	}
	if ts.external {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := js.DeleteStream(ctx, cfg.Name); err != nil {
				t.Logf("delete stream %s: %v", cfg.Name, err)
			}
		})
	}
	return st
}
