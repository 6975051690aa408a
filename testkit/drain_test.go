package testkit_test

import (
	"testing"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/testkit"
)

// unitsOn counts the units node's tree lists.
func unitsOn(t *testing.T, c *testkit.Cluster, node string) int {
	t.Helper()
	k := 0
	for _, s := range must(c.Tree(node)).Sources {
		k += len(s.Units)
	}
	return k
}

// A drained node hands its units over under load, long before the 30 s
// lease could expire, and stays a member owning nothing; undrained it takes
// units again; nothing is lost or applied twice.
func TestDrainHandsOverAndUndrainTakesBack(t *testing.T) {
	c := newCluster(t, testkit.Config{Seed: 7, Nodes: 3})
	must(c.AddStream(actors.SourceSpec{Name: "orders", KeyField: "id", BatchSize: 50, LeaseTTL: 30 * time.Second}, 9))
	mustStart(t, c)
	publishKeyed(c, testkit.NewWorkload(11), "orders", 9, 3000, 30, 12*time.Second, map[string][]brokers.Message{})
	c.Run(2 * time.Second)
	if unitsOn(t, c, "node-2") == 0 {
		t.Fatal("node-2 owns nothing")
	}
	if err := c.Drain("node-2"); err != nil {
		t.Fatal(err)
	}
	if err := c.Drain("node-2"); err == nil {
		t.Error("a second Drain was taken")
	}
	if !c.RunUntil(func() bool { return unitsOn(t, c, "node-2") == 0 }, 2*time.Second) {
		t.Fatalf("node-2 still lists %d units 2 s after its drain", unitsOn(t, c, "node-2"))
	}
	c.Run(4 * time.Second)
	if len(c.Log("drain-done")) != 1 {
		t.Errorf("drain-done events: %v", c.Log("drain-done"))
	}
	if k := unitsOn(t, c, "node-2"); k != 0 || !c.Drained("node-2") {
		t.Fatalf("drained node-2 took %d units back (drained: %v)", k, c.Drained("node-2"))
	}
	if o1, o3 := unitsOn(t, c, "node-1"), unitsOn(t, c, "node-3"); o1+o3 != 9 {
		t.Fatalf("node-1 and node-3 own %d and %d of 9 units", o1, o3)
	}
	if err := c.Undrain("node-2"); err != nil {
		t.Fatal(err)
	}
	if !c.RunUntil(func() bool { return unitsOn(t, c, "node-2") > 0 }, 3*time.Second) {
		t.Fatal("undrained node-2 took no unit within 3 s")
	}
	mustSettle(t, c, time.Minute)
	checkReport(t, c)
}

// A source added to a running node by Reload (drover reload) runs there
// without a restart, and one removed hands its units to the nodes that
// still run it; nothing is lost or applied twice.
func TestReloadAddsAndRemovesSourcesLive(t *testing.T) {
	c := newCluster(t, testkit.Config{Seed: 9, Nodes: 2})
	must(c.AddStream(actors.SourceSpec{Name: "orders", KeyField: "id", BatchSize: 50}, 4))
	must(c.AddStream(actors.SourceSpec{Name: "extra", KeyField: "id", BatchSize: 50}, 4))
	for _, n := range c.Nodes() {
		if err := c.SetSources(n, []string{"orders"}); err != nil {
			t.Fatal(err)
		}
	}
	mustStart(t, c)
	wl := testkit.NewWorkload(13)
	publishKeyed(c, wl, "orders", 4, 1000, 20, 8*time.Second, map[string][]brokers.Message{})
	publishKeyed(c, wl, "extra", 4, 1000, 20, 8*time.Second, map[string][]brokers.Message{})
	c.Run(time.Second)
	extraOn := func(node string) int {
		for _, s := range must(c.Tree(node)).Sources {
			if s.Name == "extra" {
				return len(s.Units)
			}
		}
		return -1 // not run
	}
	if extraOn("node-1") != -1 {
		t.Fatal("node-1 runs extra before its reload")
	}
	if err := c.SetSources("node-1", []string{"orders", "extra"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Reload("node-1"); err != nil {
		t.Fatal(err)
	}
	if !c.RunUntil(func() bool { return extraOn("node-1") == 4 }, 3*time.Second) {
		t.Fatalf("node-1 runs %d units of extra 3 s after its reload", extraOn("node-1"))
	}
	if err := c.SetSources("node-2", []string{"orders", "extra"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Reload("node-2"); err != nil {
		t.Fatal(err)
	}
	if !c.RunUntil(func() bool { return extraOn("node-2") > 0 }, 3*time.Second) {
		t.Fatal("node-2 runs no unit of extra 3 s after its reload")
	}
	// node-1 drops extra again: node-2 takes all of it
	if err := c.SetSources("node-1", []string{"orders"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Reload("node-1"); err != nil {
		t.Fatal(err)
	}
	if !c.RunUntil(func() bool { return extraOn("node-1") == -1 && extraOn("node-2") == 4 }, 3*time.Second) {
		t.Fatalf("after node-1 removed extra: node-1 %d, node-2 %d units of it", extraOn("node-1"), extraOn("node-2"))
	}
	mustSettle(t, c, time.Minute)
	checkReport(t, c)
}

// A source removed by Reload and brought back by the next Reload before
// its units have handed over (drover reload twice, the second while the
// first's removal still stops) runs again once the removal ended: the
// node's return of it is not lost to "still being removed".
func TestReloadBringsBackASourceStillStopping(t *testing.T) {
	c := newCluster(t, testkit.Config{Seed: 11, Nodes: 2})
	must(c.AddStream(actors.SourceSpec{Name: "orders", KeyField: "id", BatchSize: 50}, 4))
	mustStart(t, c)
	wl := testkit.NewWorkload(17)
	publishKeyed(c, wl, "orders", 4, 1000, 20, 8*time.Second, map[string][]brokers.Message{})
	unitsOn := func(node string) int {
		for _, s := range must(c.Tree(node)).Sources {
			if s.Name == "orders" {
				return len(s.Units)
			}
		}
		return -1 // not run
	}
	if !c.RunUntil(func() bool { return unitsOn("node-1") > 0 && unitsOn("node-2") > 0 }, 5*time.Second) {
		t.Fatalf("orders not shared: node-1 %d, node-2 %d units", unitsOn("node-1"), unitsOn("node-2"))
	}
	must(0, c.SetSources("node-1", []string{}))
	must(0, c.Reload("node-1"))
	must(0, c.SetSources("node-1", []string{"orders"}))
	must(0, c.Reload("node-1"))
	if !c.RunUntil(func() bool { return unitsOn("node-1") > 0 }, 10*time.Second) {
		t.Fatalf("node-1 runs %d units of orders 10 s after it was brought back", unitsOn("node-1"))
	}
	mustSettle(t, c, time.Minute)
	checkReport(t, c)
}
