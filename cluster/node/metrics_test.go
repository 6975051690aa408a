package node_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/cluster/config"
	"github.com/drover-dev/drover/cluster/node"
)

// A node's /metrics shows each unit's state (one series, the tree's state)
// and its counters per source; the per-unit counters only with
// node.metrics_per_unit.
func TestMetricsShowUnitStateAndPerSourceCounters(t *testing.T) {
	for _, perUnit := range []bool{false, true} {
		cfg, err := config.Parse([]byte(`node: {name: n1, debug_addr: "127.0.0.1:0", metrics_per_unit: `+map[bool]string{false: "false", true: "true"}[perUnit]+`}
cluster: {bind: "127.0.0.1:0"}
store: {url: "sqlite:`+t.TempDir()+`/d.db"}
sources:
  - {name: m, type: memory, memory: {partitions: 2}, records: {key: id}}
`), config.Options{})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		n, err := node.Start(ctx, cfg, node.Options{})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		var body string
		for {
			body = string(e2eGet(t.Context(), t, "http://"+n.DebugAddr()+"/metrics"))
			if strings.Contains(body, `drover_unit_state{node="n1",source="m",state="running",unit="m/0"} 1`) &&
				strings.Contains(body, `drover_unit_state{node="n1",source="m",state="running",unit="m/1"} 1`) &&
				strings.Contains(body, `drover_source_lease_changes_total{node="n1",source="m"} 2`) {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("per_unit=%v: /metrics never showed both units running and the source's counters:\n%s", perUnit, body)
			}
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond): // a poll interval, not a synchronisation
			}
		}
		if got := strings.Count(body, "drover_unit_state{"); got != 2 {
			t.Errorf("per_unit=%v: %d drover_unit_state series, want one per unit:\n%s", perUnit, got, body)
		}
		if has := strings.Contains(body, "drover_unit_lease_changes_total{"); has != perUnit {
			t.Errorf("per_unit=%v: per-unit counters shown: %v", perUnit, has)
		}
		n.Close()
		cancel()
	}
}
