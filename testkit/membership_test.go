package testkit_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/testkit"
)

const (
	detection = time.Second
	probe     = 200 * time.Millisecond // detection/5, at most 200 ms
	healEvery = 2 * time.Second
	// healBound is how soon views converge by healing once the nodes can
	// reach each other: one heal interval (at most 5/4 of HealEvery with
	// its jitter) and a probe or two for gossip, within HealEvery plus the
	// detection delay.
	healBound = healEvery + detection + 2*probe
)

// memberCluster is a small started cluster with a stream source, its
// membership as configured by cfg (Seed, Nodes and the stream are set
// here).
func memberCluster(t *testing.T, cfg testkit.Config) *testkit.Cluster {
	t.Helper()
	if cfg.Nodes == 0 {
		cfg.Nodes = 3
	}
	cfg.Seed, cfg.Detection = 21, detection
	c := newCluster(t, cfg)
	must(c.AddStream(actors.SourceSpec{Name: "orders", KeyField: "id", BatchSize: 20}, 3))
	mustStart(t, c)
	if !c.Converged() {
		t.Fatalf("not converged after Start: %v", c.Views())
	}
	return c
}

// firstNodeSeeds is the set-up architecture §4 warns about: node-1 joins
// no one, the others join node-1.
func firstNodeSeeds(node string, _ []string) []string {
	if node == "node-1" {
		return nil
	}
	return []string{"node-1"}
}

func sees(c *testkit.Cluster, node string, want ...string) bool {
	var got []string
	for _, m := range c.Views()[node] {
		name, _, _ := strings.Cut(m, "#")
		got = append(got, name)
	}
	return slices.Equal(got, want)
}

// The first node, killed and restarted with an empty join list, forms a
// cluster of its own; healing (the others retry their seeds and the members
// they saw die) merges the two within a heal interval, and the stream is
// applied exactly once. Without healing the split stays.
func TestRestartedFirstNodeMergesByHealing(t *testing.T) {
	for _, healing := range []bool{true, false} {
		c := memberCluster(t, testkit.Config{Join: firstNodeSeeds, NoHealing: !healing})
		wl := testkit.NewWorkload(3)
		for i := 0; i < 20; i++ {
			c.At(time.Duration(i)*500*time.Millisecond, func() { must(c.Publish("orders", strconv.Itoa(i%3), wl.Batch(5)...)) })
		}
		c.Run(2 * time.Second)
		if err := c.Kill("node-1"); err != nil {
			t.Fatal(err)
		}
		c.Run(3 * time.Second) // node-1 declared dead by the others
		restarted := c.Now()
		if err := c.Restart("node-1"); err != nil {
			t.Fatal(err)
		}
		if !sees(c, "node-1", "node-1") || !sees(c, "node-2", "node-2", "node-3") {
			t.Fatalf("healing=%v: the restarted node-1 did not start alone: %v", healing, c.Views())
		}
		if e := c.Log("member-alone"); len(e) == 0 || e[len(e)-1].Node != "node-1" || e[len(e)-1].Time.Before(restarted) {
			t.Errorf("healing=%v: no member-alone event for the restart: %v", healing, e)
		}
		if !healing {
			if c.RunUntil(c.Converged, time.Minute) {
				t.Fatalf("without healing the split merged by itself: %v", c.Views())
			}
			continue
		}
		start := c.Now()
		if !c.RunUntil(c.Converged, healBound) {
			t.Fatalf("not converged within %s of the restart: %v", healBound, c.Views())
		}
		t.Logf("converged %s after the restart", c.Now().Sub(start))
		if len(c.Log("member-healed")) == 0 {
			t.Error("converged without a heal")
		}
		mustSettle(t, c, time.Minute)
		checkReport(t, c)
		if !c.Converged() {
			t.Fatalf("not converged after Settle: %v", c.Views())
		}
	}
}

// A partition shorter than gossipToTheDead (30 s) heals by itself, as
// memberlist keeps gossiping to the members it declared dead; a longer one
// only by the healing loop.
func TestLongPartitionHealsOnlyByHealing(t *testing.T) {
	cases := []struct {
		name    string
		cut     time.Duration
		healing bool
		merges  bool
	}{
		{"short, no healing", 5 * time.Second, false, true},
		{"long, no healing", 40 * time.Second, false, false},
		{"long, healing", 40 * time.Second, true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := memberCluster(t, testkit.Config{NoHealing: !tc.healing})
			if err := c.Partition("node-3"); err != nil {
				t.Fatal(err)
			}
			c.Run(detection + 2*probe)
			if !sees(c, "node-3", "node-3") || !sees(c, "node-1", "node-1", "node-2") {
				t.Fatalf("views during the partition: %v", c.Views())
			}
			c.Run(tc.cut - detection - 2*probe)
			if err := c.Heal("node-3"); err != nil {
				t.Fatal(err)
			}
			healed := c.Now()
			if !tc.merges {
				if c.RunUntil(c.Converged, time.Minute) {
					t.Fatalf("merged by itself after a %s partition: %v", tc.cut, c.Views())
				}
				return
			}
			bound := 2 * probe
			if tc.healing {
				bound = healBound
			}
			if !c.RunUntil(c.Converged, bound) {
				t.Fatalf("not converged within %s of the heal: %v", bound, c.Views())
			}
			heals := 0
			for _, e := range c.Log("member-healed") {
				if !e.Time.Before(healed) {
					heals++
				}
			}
			if tc.healing != (heals > 0) {
				t.Errorf("%d heals after the partition ended, want them only for a long partition", heals)
			}
		})
	}
}

// A paused node (a GC pause) is declared dead and, resumed within
// gossipToTheDead, taken back by itself. After a longer pause its own view
// still lists everyone (it was frozen) but the others have reaped it: only
// healing repairs that.
func TestPausedNodeComesBack(t *testing.T) {
	cases := []struct {
		name    string
		pause   time.Duration
		healing bool
		merges  bool
	}{
		{"short, no healing", 10 * time.Second, false, true},
		{"long, no healing", 35 * time.Second, false, false},
		{"long, healing", 35 * time.Second, true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := memberCluster(t, testkit.Config{NoHealing: !tc.healing})
			if err := c.Pause("node-2"); err != nil {
				t.Fatal(err)
			}
			c.Run(detection + 2*probe)
			if !sees(c, "node-1", "node-1", "node-3") || !sees(c, "node-2", "node-1", "node-2", "node-3") {
				t.Fatalf("views during the pause: %v", c.Views())
			}
			c.Run(tc.pause - detection - 2*probe)
			if err := c.Resume("node-2"); err != nil {
				t.Fatal(err)
			}
			if !tc.merges {
				if c.RunUntil(c.Converged, time.Minute) {
					t.Fatalf("merged by itself after a %s pause: %v", tc.pause, c.Views())
				}
				if !sees(c, "node-2", "node-1", "node-2", "node-3") || !sees(c, "node-3", "node-1", "node-3") {
					t.Fatalf("want a one-sided view: %v", c.Views())
				}
				return
			}
			bound := 2 * probe
			if tc.healing {
				bound = healBound
			}
			if !c.RunUntil(c.Converged, bound) {
				t.Fatalf("not converged within %s of the resume: %v", bound, c.Views())
			}
		})
	}
}

// A node starting with a join list that names a running node joins the
// cluster at once (push-pull with its seed, gossip for the rest), without
// healing; with an empty join list it stays alone.
func TestNodeJoinsItsSeedAtStart(t *testing.T) {
	for _, seeds := range [][]string{{"node-2"}, nil} {
		c := memberCluster(t, testkit.Config{Join: firstNodeSeeds, NoHealing: true})
		if err := c.Stop("node-3"); err != nil {
			t.Fatal(err)
		}
		if !c.RunUntil(func() bool { return c.Stopped("node-3") }, 10*time.Second) {
			t.Fatal("node-3 did not stop")
		}
		if !c.RunUntil(c.Converged, 2*probe) {
			t.Fatalf("the others still list node-3 after it left: %v", c.Views())
		}
		if err := c.SetJoin("node-3", seeds); err != nil {
			t.Fatal(err)
		}
		if err := c.Restart("node-3"); err != nil {
			t.Fatal(err)
		}
		if seeds == nil {
			if !sees(c, "node-3", "node-3") {
				t.Fatalf("node-3 with no seeds did not start alone: %v", c.Views())
			}
			if c.RunUntil(c.Converged, time.Minute) {
				t.Fatalf("node-3 with no seeds joined without healing: %v", c.Views())
			}
			continue
		}
		// the seed and node-3 know each other at once; node-1 hears of
		// node-3 from node-2 at its next probe
		if !sees(c, "node-3", "node-1", "node-2", "node-3") || !sees(c, "node-2", "node-1", "node-2", "node-3") {
			t.Fatalf("node-3 did not merge with its seed at start: %v", c.Views())
		}
		if !c.RunUntil(c.Converged, 2*probe) {
			t.Fatalf("not converged within two probes of the join: %v", c.Views())
		}
		if err := c.SetJoin("node-3", []string{"node-9"}); err == nil {
			t.Error("SetJoin took an unknown seed")
		}
	}
}

// The others retry the members they saw die, not only their join lists,
// for HealMemory: node-3, named in no join list, restarted alone, is found
// again while its death is remembered, and not after.
func TestHealingRetriesRecentlyDead(t *testing.T) {
	for _, memory := range []time.Duration{0, 5 * time.Second} {
		// node-1 and node-2 never name node-3 in their join lists
		c := memberCluster(t, testkit.Config{HealMemory: memory, Join: firstNodeSeeds})
		if err := c.SetJoin("node-3", nil); err != nil {
			t.Fatal(err)
		}
		if err := c.Kill("node-3"); err != nil {
			t.Fatal(err)
		}
		c.Run(10 * time.Second)
		if err := c.Restart("node-3"); err != nil {
			t.Fatal(err)
		}
		merged := c.RunUntil(c.Converged, healBound)
		if memory == 0 && !merged {
			t.Fatalf("default memory: node-3 not found again within %s: %v", healBound, c.Views())
		}
		if memory > 0 && (merged || c.RunUntil(c.Converged, time.Minute)) {
			t.Fatalf("memory %s: node-3, dead for 10 s, was retried: %v", memory, c.Views())
		}
	}
}
