package testkit_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/testkit"
)

// Found by review: a restarted supervisor forgets its units while they are
// still stopping, and a unit's last status write (stopped) brought its
// entry back. When the new instance does not run the unit (placement gave
// it to a node that came back meanwhile), the tree kept a stopped ghost for
// good, and two nodes listed the unit.
func edgeGhostUnits(t *testing.T) error {
	c := edgeCluster(t, testkit.Config{Seed: 1, Nodes: 2})
	must(c.AddStream(actors.SourceSpec{Name: "s", KeyField: "id", BatchSize: 50}, 4))
	mustStart(t, c)
	c.Run(3 * time.Second)
	// a unit placement gives node-2 while it runs
	var moved string
	for u, owners := range c.Owners() {
		if len(owners) == 1 && owners[0] == "node-2" && (moved == "" || u < moved) {
			moved = u
		}
	}
	if moved == "" {
		t.Fatalf("node-2 owns no unit: %v", c.Owners())
	}
	if err := c.Kill("node-2"); err != nil {
		t.Fatal(err)
	}
	if !c.RunUntil(func() bool { return leaseOwner(t, c, moved) == "node-1" }, time.Minute) {
		t.Fatalf("%s not taken over by node-1", moved)
	}
	// the unit's release waits for the lock, so it is still stopping when
	// its supervisor restarts (within 1 s); node-2 is back by then
	c.LockUnit(moved, 4*time.Second)
	if err := c.CrashSupervisor("node-1", "s"); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart("node-2"); err != nil {
		t.Fatal(err)
	}
	must(c.Publish("s", "0", upserts(5, "after")...))
	c.Run(5 * time.Second) // Settle would lift the lock at once
	if !c.Settle(3 * time.Minute) {
		return fmt.Errorf("did not settle: %v", c.Report().Violations)
	}
	c.Run(10 * time.Second) // the lease the hard stop could not release expires
	if got := leaseOwner(t, c, moved); got != "node-2" {
		t.Fatalf("%s is leased to %q, want node-2: the scenario did not move it", moved, got)
	}
	var bad []string
	for u, owners := range c.Owners() {
		if len(owners) != 1 {
			bad = append(bad, fmt.Sprintf("%s listed by %v", u, owners))
		}
	}
	for _, n := range c.Running() {
		for _, s := range must(c.Tree(n)).Sources {
			for _, u := range s.Units {
				if u.State == actors.StateStopped {
					bad = append(bad, fmt.Sprintf("%s lists %s as stopped under its %s supervisor", n, u.Unit, s.State))
				}
			}
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%s", strings.Join(bad, "; "))
	}
	return settle(c) // and every invariant, the tree's among them
}
