package testkit_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/testkit"
)

// unitLag is the tree's lag and lag_seconds of unit on node.
func unitLag(t *testing.T, c *testkit.Cluster, node, unit string) (int64, float64, string) {
	t.Helper()
	u, ok := unitEntry(t, c, node, unit)
	if !ok {
		t.Fatalf("%s does not show %s", node, unit)
	}
	return u.Lag, u.LagSeconds, u.State
}

// A unit whose applies fail shows lag_seconds growing with virtual time
// from the oldest message it holds (the node's clock, not the fetch's
// time), and 0 once it applied them; before its first fetch it shows -1.
func TestLagSecondsGrowsWhileStuckAndIsZeroWhenCaughtUp(t *testing.T) {
	c, err := testkit.New(testkit.Config{Seed: 7, Nodes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.AddStream(actors.SourceSpec{Name: "orders", BatchSize: 10}, 1); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	running := func() bool {
		tr, _ := c.Tree("node-1")
		return len(tr.Sources) == 1 && len(tr.Sources[0].Units) == 1 && tr.Sources[0].Units[0].State == actors.StateRunning &&
			tr.Sources[0].Units[0].LastPullAt != nil
	}
	if !c.RunUntil(running, 30*time.Second) {
		t.Fatal("orders/0 is not running after 30 s")
	}
	if lag, secs, _ := unitLag(t, c, "node-1", "orders/0"); lag != 0 || secs != 0 {
		t.Fatalf("idle unit: lag %d, lag_seconds %v; want 0, 0", lag, secs)
	}

	c.StoreFaults().FailNext("apply", 1_000_000)
	published := c.Now()
	for i := range 5 {
		if _, err := c.Publish("orders", "0", brokers.Message{Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprintf(`{"id":%d}`, i))}); err != nil {
			t.Fatal(err)
		}
	}
	c.Run(20 * time.Second)
	_, secs, state := unitLag(t, c, "node-1", "orders/0")
	if want := c.Now().Sub(published).Seconds(); secs < want-1 || secs > want {
		t.Fatalf("stuck unit (%s): lag_seconds %v, want about %v (the age of its oldest message)", state, secs, want)
	}
	c.Run(5 * time.Second)
	if _, later, _ := unitLag(t, c, "node-1", "orders/0"); later < secs+4 {
		t.Fatalf("lag_seconds %v 5 s after %v: it does not grow with the clock", later, secs)
	}

	if !c.Settle(time.Minute) {
		t.Fatal("no settle")
	}
	if lag, secs, _ := unitLag(t, c, "node-1", "orders/0"); lag != 0 || secs != 0 {
		t.Fatalf("caught up: lag %d, lag_seconds %v; want 0, 0", lag, secs)
	}
	if r := c.Report(); r.Lost != 0 || r.Duplicated != 0 || len(r.Violations) != 0 {
		t.Fatalf("report %+v", r)
	}
}
