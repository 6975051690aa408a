package testkit_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/testkit"
)

// The scale mode at a size that runs in a few seconds: every scenario
// ends with every unit owned exactly once, a kill moves about the dead
// node's units, a join moves units to the joiner, leases are renewed in
// batches (a statement rate that grows with the nodes, not the units), and
// the run is the same for a seed but for the placement times.
func TestScale(t *testing.T) {
	const nodes, units = 10, 500
	var owned []string // scenarios whose end the test checked itself
	cfg := testkit.ScaleConfig{Seed: 7, Nodes: nodes, Units: units, Inspect: func(scenario string, c *testkit.Cluster) {
		t.Helper()
		owners := c.Owners() // from the running nodes' trees
		if len(owners) != units {
			t.Errorf("%s: %d units in the trees, want %d", scenario, len(owners), units)
		}
		leases, err := c.Store().List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		held := map[string]string{}
		for _, l := range leases {
			if l.ExpiresAt.After(c.Now()) {
				held[l.Unit] = l.Owner
			}
		}
		for u, ns := range owners {
			if len(ns) != 1 || held[u] != ns[0] {
				t.Errorf("%s: %s is listed by %v and leased to %q", scenario, u, ns, held[u])
			}
		}
		owned = append(owned, scenario)
	}}
	a, err := testkit.Scale(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", a.Table())
	if !a.OK() {
		t.Fatalf("the run broke an invariant or did not settle:\n%s", a.Table())
	}
	if want := "cold-start kill-1 join-1 rolling-restart"; strings.Join(owned, " ") != want {
		t.Fatalf("scenarios checked: %v, want %s", owned, want)
	}
	row := map[string]testkit.ScaleRow{}
	for _, r := range a.Rows {
		row[r.Scenario] = r
		// each node renews all its leases in one statement every
		// RenewInterval (500 ms): about 2 per node per second. Renewing
		// per unit (every third of the 10 s TTL) would be 150 a second.
		if bound := float64(nodes) * 2 * 1.5; r.SteadyRate <= 0 || r.SteadyRate > bound {
			t.Errorf("%s: %.1f lease statements a second once settled, want in (0, %.0f]", r.Scenario, r.SteadyRate, bound)
		}
		if r.Changes == 0 || r.PlaceMax <= 0 {
			t.Errorf("%s: %d membership changes, placement at most %s per change", r.Scenario, r.Changes, r.PlaceMax)
		}
		// a move beyond what placement moves is a unit that changed hands
		// because views disagreed for a moment (a probe apart): a few, not
		// units going back and forth
		if r.Moved < r.MustMove || r.Moved > r.MustMove+r.MustMove/5+5 {
			t.Errorf("%s: %d units moved, placement moved %d", r.Scenario, r.Moved, r.MustMove)
		}
	}
	cold, kill, join := row["cold-start"], row["kill-1"], row["join-1"]
	if cold.Moved != 0 || cold.LeaseStmts < units {
		t.Errorf("cold start: %d moved, %d lease statements for %d units", cold.Moved, cold.LeaseStmts, units)
	}
	// placement moves the dead node's units, and a few more as the others'
	// load bounds step up (placement.Assign's doc: about 11% of the
	// leaver's count at some tens of units per member)
	if kill.NodeUnits == 0 || kill.Moved < kill.NodeUnits || kill.Moved > kill.NodeUnits+kill.NodeUnits/2 {
		t.Errorf("kill: %d units moved, the dead node had %d", kill.Moved, kill.NodeUnits)
	}
	if join.NodeUnits == 0 || join.Moved < join.NodeUnits {
		t.Errorf("join: %d units moved, the joiner's share is %d", join.Moved, join.NodeUnits)
	}
	if kill.Took < time.Second || kill.Took > 3*time.Second {
		t.Errorf("kill: settled after %s, want within detection (1 s) plus a takeover", kill.Took)
	}

	cfg.Inspect = nil
	b, err := testkit.Scale(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if a.Digest != b.Digest || len(a.Rows) != len(b.Rows) {
		t.Fatalf("two runs of seed %d: digests %s and %s", cfg.Seed, a.Digest, b.Digest)
	}
	for i := range a.Rows {
		x, y := a.Rows[i], b.Rows[i]
		x.PlaceMean, x.PlaceMax, y.PlaceMean, y.PlaceMax = 0, 0, 0, 0
		if x != y {
			t.Errorf("two runs of seed %d differ:\n%s\n%s", cfg.Seed, x, y)
		}
	}
}

func TestScaleConfigErrors(t *testing.T) {
	for _, c := range []struct {
		cfg  testkit.ScaleConfig
		want string
	}{
		{testkit.ScaleConfig{Nodes: 1}, "nodes 1"},
		{testkit.ScaleConfig{Units: 3, Sources: 4}, "sources 4"},
		{testkit.ScaleConfig{Nodes: 5, Wave: 6}, "wave 6"},
	} {
		if _, err := testkit.Scale(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error naming %q", c.cfg, err, c.want)
		}
	}
}
