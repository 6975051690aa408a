package placement

import (
	"fmt"
	"math"
	"testing"
)

func withMax(m Member, maxCapacity float64) Member {
	m.MaxCapacity = maxCapacity
	return m
}

func TestEffectiveMaxCapacity(t *testing.T) {
	t.Parallel()
	leaving := func(name string, maxCapacity float64) Member {
		return Member{Name: name, Capacity: 1, MaxCapacity: maxCapacity, State: StateLeaving}
	}
	for _, c := range []struct {
		name    string
		members []Member
		own     float64
		want    float64
	}{
		{"no members, own", nil, 4, 4},
		{"no members, own 0 is the default", nil, 0, DefaultMaxCapacity},
		{"own NaN is the default", nil, math.NaN(), DefaultMaxCapacity},
		{"own above MaxCapacity", nil, 5000, MaxCapacity},
		{"all agree", []Member{withMax(alive("a", 1), 8), withMax(alive("b", 1), 8)}, 8, 8},
		{"a lower member wins", []Member{withMax(alive("a", 1), 8), withMax(alive("b", 1), 2)}, 8, 2},
		{"own lower than every member", []Member{withMax(alive("a", 1), 8), withMax(alive("b", 1), 16)}, 4, 4},
		{"a higher member changes nothing", []Member{withMax(alive("a", 1), 1e9)}, 16, 16},
		{"members that gossip none are left out", []Member{alive("old", 1), withMax(alive("b", 1), 8)}, 16, 8},
		{"only members that gossip none", []Member{alive("old", 1), alive("older", 1)}, 0, DefaultMaxCapacity},
		{"negative and NaN are left out", []Member{withMax(alive("a", 1), -3), withMax(alive("b", 1), math.NaN())}, 8, 8},
		{"leaving members are left out", []Member{leaving("l", 1), withMax(alive("b", 1), 8)}, 16, 8},
		{"a fraction", []Member{withMax(alive("a", 1), 0.5)}, 16, 0.5},
		{"the reviewer's view", []Member{withMax(alive("a", 2), 4), withMax(alive("b", 1), 1), withMax(alive("c", 4), 8)}, 8, 1},
	} {
		if got := EffectiveMaxCapacity(c.members, c.own); got != c.want {
			t.Errorf("%s: EffectiveMaxCapacity(%v, %v) = %v, want %v", c.name, c.members, c.own, got, c.want)
		}
	}
}

func TestMaxCapacityMismatch(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		members []Member
		want    string
	}{
		{"none", nil, ""},
		{"agree", []Member{withMax(alive("a", 1), 8), withMax(alive("b", 1), 8)}, ""},
		{"members that gossip none are left out", []Member{withMax(alive("a", 1), 8), alive("old", 1)}, ""},
		{"leaving members are left out", []Member{withMax(alive("a", 1), 8), {Name: "l", MaxCapacity: 2, State: StateLeaving}}, ""},
		{"differ, sorted by name", []Member{withMax(alive("c", 4), 8), withMax(alive("a", 2), 4), withMax(alive("b", 1), 1), alive("old", 1)}, "a=4 b=1 c=8"},
		{"fractions", []Member{withMax(alive("a", 1), 0.5), withMax(alive("b", 1), 16)}, "a=0.5 b=16"},
	} {
		if got := MaxCapacityMismatch(c.members); got != c.want {
			t.Errorf("%s: MaxCapacityMismatch = %q, want %q", c.name, got, c.want)
		}
	}
}

// The review of cluster.max_capacity: nodes configured with different
// max_capacity values (each valid, as during a rolling change of the
// value) clamped with their own value, computed different placements, and
// some units were owned by no node, silently. Each node now clamps with
// EffectiveMaxCapacity of its view, the same on every node.
func TestMixedMaxCapacityLeavesNoUnitUnowned(t *testing.T) {
	t.Parallel()
	view := []Member{withMax(alive("a", 2), 4), withMax(alive("b", 1), 1), withMax(alive("c", 4), 8)}
	// owners maps each unit to the nodes that take it, each node computing
	// Owned with its own view (here, all the same) and the clamp limit gives.
	owners := func(units []string, limit func(self Member) float64) map[string][]string {
		out := map[string][]string{}
		for _, self := range view {
			for _, u := range Owned(self.Name, units, view, limit(self)) {
				out[u] = append(out[u], self.Name)
			}
		}
		return out
	}
	effective := func(self Member) float64 { return EffectiveMaxCapacity(view, self.MaxCapacity) }
	for n := 1; n <= 80; n++ {
		units := make([]string, n)
		for i := range units {
			units[i] = fmt.Sprintf("m/%d", i)
		}
		got := owners(units, effective)
		for _, u := range units {
			if len(got[u]) != 1 {
				t.Errorf("%d units: unit %s is owned by %v with the effective clamp, want exactly one owner", n, u, got[u])
			}
		}
		if n != 59 {
			continue
		}
		// Each node's own value (the old behaviour) leaves some unit
		// unowned: the case tells the two apart.
		old := owners(units, func(self Member) float64 { return self.MaxCapacity })
		var unowned []string
		for _, u := range units {
			if len(old[u]) == 0 {
				unowned = append(unowned, u)
			}
		}
		if len(unowned) == 0 {
			t.Fatalf("with each node's own max_capacity every one of %d units has an owner: the case does not show the bug", n)
		}
		t.Logf("each node's own clamp leaves %v of %d units unowned", unowned, n)
	}
}
