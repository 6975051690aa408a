package node

import (
	"context"
	"fmt"
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
	cfg := parseConfig(t, memoryNodeYAML(`debug_addr: "`+busy.Addr().String()+`"`, `bind: "127.0.0.1:0"`, t.TempDir(), 1), config.Options{})
	n, err := Start(context.Background(), cfg, Options{})
	if err == nil {
		n.Close()
		t.Fatal("started although the debug address is taken")
	}
	if !strings.Contains(err.Error(), "node.debug_addr") {
		t.Fatalf("error %q does not name node.debug_addr", err)
	}
}

// memoryNodeYAML is the configuration of node n1 with the given fields of
// node (beside its name) and of cluster, its SQLite store in dir and one
// memory source m of the given partitions.
func memoryNodeYAML(node, cluster, dir string, partitions int) string {
	return fmt.Sprintf(`node: {name: n1, %s}
cluster: {%s}
store: {url: "sqlite:%s/d.db"}
sources:
  - {name: m, type: memory, memory: {partitions: %d}, records: {key: id}}
`, node, cluster, dir, partitions)
}

// parseConfig parses a node's configuration, failing t where it does not.
func parseConfig(t *testing.T, yaml string, opts config.Options) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), opts)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// startNode starts the node of a configuration, failing t where it
// does not; the caller closes it.
func startNode(t *testing.T, yaml string, opts config.Options) *Node {
	t.Helper()
	n, err := Start(t.Context(), parseConfig(t, yaml, opts), Options{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
