package node

import (
	"context"
	"net"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/drover-dev/drover/cluster/config"
)

// A node that cannot start (its debug address is taken) stops everything it
// had started, memberlist included: no goroutine is left behind.
func TestFailedStartCleansUp(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	// protoactor logs dead letters through a throttle goroutine that ends
	// on its own after its interval
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), goleak.IgnoreAnyFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
	cfg, err := config.Parse([]byte(`node: {name: n1, debug_addr: "`+busy.Addr().String()+`"}
cluster: {bind: "127.0.0.1:0"}
store: {url: "sqlite:`+t.TempDir()+`/d.db"}
sources:
  - {name: m, type: memory, memory: {partitions: 1}, records: {key: id}}
`), config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	n, err := Start(context.Background(), cfg, Options{})
	if err == nil {
		n.Close()
		t.Fatal("started although the debug address is taken")
	}
	if !strings.Contains(err.Error(), "node.debug_addr") {
		t.Fatalf("error %q does not name node.debug_addr", err)
	}
}
