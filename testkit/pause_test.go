package testkit_test

import (
	"testing"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/testkit"
)

// unitEntry is node's tree entry of unit; ok false when it does not list
// it.
func unitEntry(t *testing.T, c *testkit.Cluster, node, unit string) (actors.UnitStatus, bool) {
	t.Helper()
	tr, err := c.Tree(node)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range tr.Sources {
		for _, u := range s.Units {
			if u.Unit == unit {
				return u, true
			}
		}
	}
	return actors.UnitStatus{}, false
}

// unitState is the state and lease token node's tree shows for unit ("" when
// it does not list it).
func unitState(t *testing.T, c *testkit.Cluster, node, unit string) (string, int64) {
	t.Helper()
	u, _ := unitEntry(t, c, node, unit)
	return u.State, u.LeaseToken
}

func soleOwner(t *testing.T, c *testkit.Cluster, unit string) string {
	t.Helper()
	o := c.Owners()[unit]
	if len(o) != 1 {
		t.Fatalf("%s owned by %v, want one owner", unit, o)
	}
	return o[0]
}

// A paused unit stays paused when its owner is killed (the new owner
// read the pause from the controls table, not from the node that took
// it), and when it moves again by a graceful stop and restart; resumed,
// it goes on from its checkpoint: nothing lost, nothing applied twice.
func TestPauseSurvivesOwnerKill(t *testing.T) {
	// the control sent to the owner (the new owner must read it from the
	// table) or to another node (the owner must)
	t.Run("ViaOwner", func(t *testing.T) { pauseKill(t, true) })
	t.Run("ViaOther", func(t *testing.T) { pauseKill(t, false) })
}

func pauseKill(t *testing.T, viaOwner bool) {
	c := newCluster(t, testkit.Config{Seed: 7, Nodes: 3, Detection: time.Second})
	must(c.AddStream(actors.SourceSpec{Name: "orders", KeyField: "id", BatchSize: 20}, 4))
	mustStart(t, c)
	byPart := map[string][]brokers.Message{}
	publishKeyed(c, testkit.NewWorkload(1), "orders", 4, 800, 8, 2*time.Second, byPart)
	c.Run(4 * time.Second)
	const unit = "orders/1"
	owner := soleOwner(t, c, unit)
	via := owner
	for _, n := range c.Nodes() {
		if n != owner && !viaOwner {
			via = n // the control reaches the owner through the table
			break
		}
	}
	if err := c.Control(via, "orders", unit, true); err != nil {
		t.Fatal(err)
	}
	c.Run(2 * time.Second)
	if st, _ := unitState(t, c, owner, unit); st != actors.StatePaused {
		t.Fatalf("%s on its owner %s: state %q, want paused", unit, owner, st)
	}
	cp := checkpointOf(t, c, unit)
	others := map[string]string{}
	for _, p := range []string{"0", "2", "3"} {
		others[p] = checkpointOf(t, c, "orders/"+p)
	}
	publishKeyed(c, testkit.NewWorkload(2), "orders", 4, 800, 8, 2*time.Second, byPart)
	c.Run(4 * time.Second)
	if got := checkpointOf(t, c, unit); got != cp {
		t.Fatalf("paused %s moved its checkpoint from %s to %s", unit, cp, got)
	}
	for p, was := range others {
		if checkpointOf(t, c, "orders/"+p) == was {
			t.Errorf("orders/%s did not go on while %s was paused", p, unit)
		}
	}

	if err := c.Kill(owner); err != nil {
		t.Fatal(err)
	}
	c.Run(6 * time.Second)
	next := soleOwner(t, c, unit)
	if st, tok := unitState(t, c, next, unit); next == owner || st != actors.StatePaused || tok == 0 {
		t.Fatalf("after the kill of %s: %s on %s is %q with token %d, want paused under a lease on another node", owner, unit, next, st, tok)
	}
	if got := checkpointOf(t, c, unit); got != cp {
		t.Fatalf("%s's new owner applied while paused: checkpoint %s, was %s", unit, got, cp)
	}
	// the killed node comes back, the new owner leaves and comes back:
	// wherever the unit lands, it stays paused
	if err := c.Restart(owner); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(next); err != nil {
		t.Fatal(err)
	}
	c.Run(6 * time.Second)
	if err := c.Restart(next); err != nil {
		t.Fatal(err)
	}
	c.Run(6 * time.Second)
	last := soleOwner(t, c, unit)
	if st, _ := unitState(t, c, last, unit); st != actors.StatePaused {
		t.Fatalf("after restarts, %s on %s is %q, want paused", unit, last, st)
	}
	if got := checkpointOf(t, c, unit); got != cp {
		t.Fatalf("%s applied while paused, after restarts: checkpoint %s, was %s", unit, got, cp)
	}

	if err := c.Control(via, "orders", unit, false); err != nil {
		t.Fatal(err)
	}
	mustSettle(t, c, 2*time.Minute)
	if r := checkReport(t, c); r.Produced != 1600 {
		t.Fatalf("produced %d, want 1600", r.Produced)
	}
	if st, _ := unitState(t, c, soleOwner(t, c, unit), unit); st == actors.StatePaused {
		t.Fatalf("%s still paused after its resume", unit)
	}
	if checkpointOf(t, c, unit) == cp {
		t.Fatalf("%s did not go on after its resume", unit)
	}
}

// Pausing a source pauses every unit of it, passive ones too (they are
// activated to show paused, and fetch nothing), on every node; the
// others go on; resumed, the messages published meanwhile are applied.
func TestPauseSourceWithPassiveUnits(t *testing.T) {
	c := newCluster(t, testkit.Config{Seed: 11, Nodes: 2, Detection: time.Second,
		Tuning: actors.Tuning{PassivateAfter: 200 * time.Millisecond}})
	must(c.AddStream(actors.SourceSpec{Name: "orders", KeyField: "id", BatchSize: 20}, 4))
	must(c.AddStream(actors.SourceSpec{Name: "other", KeyField: "id", BatchSize: 20}, 2))
	mustStart(t, c)
	byPart := map[string][]brokers.Message{}
	publishKeyed(c, testkit.NewWorkload(1), "orders", 4, 200, 2, time.Second, byPart)
	c.Run(5 * time.Second) // applied, then idle: passive
	if err := c.Control("node-1", "orders", "", true); err != nil {
		t.Fatal(err)
	}
	c.Run(2 * time.Second)
	paused := 0
	for _, n := range c.Running() {
		tr, _ := c.Tree(n)
		for _, s := range tr.Sources {
			for _, u := range s.Units {
				switch {
				case s.Name == "orders" && (u.State != actors.StatePaused || u.Passive):
					t.Errorf("%s on %s: state %q passive %v, want paused and active", u.Unit, n, u.State, u.Passive)
				case s.Name == "orders":
					paused++
				case u.State == actors.StatePaused:
					t.Errorf("%s of another source paused", u.Unit)
				}
			}
		}
	}
	if paused != 4 {
		t.Fatalf("%d units of orders paused, want 4", paused)
	}
	before := map[string]string{}
	for p := range 4 {
		u := "orders/" + string(rune('0'+p))
		before[u] = checkpointOf(t, c, u)
	}
	publishKeyed(c, testkit.NewWorkload(2), "orders", 4, 200, 2, time.Second, byPart)
	must(c.Publish("other", "0", testkit.NewWorkload(3).Batch(10)...))
	c.Run(4 * time.Second)
	for u, cp := range before {
		if got := checkpointOf(t, c, u); got != cp {
			t.Errorf("paused %s moved from %s to %s", u, cp, got)
		}
	}
	if checkpointOf(t, c, "other/0") == "" {
		t.Error("the other source did not apply while orders was paused")
	}
	if err := c.Control("node-2", "orders", "", false); err != nil {
		t.Fatal(err)
	}
	mustSettle(t, c, time.Minute)
	checkReport(t, c)
}
