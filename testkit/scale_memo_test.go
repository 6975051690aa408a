package testkit

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/drover-dev/drover/actors/placement"
)

// The placement memo answers what placement.Owned answers, for views that
// differ in members, states and capacities, and for a units slice changed
// in place after it was hashed (its remembered hash is stale: a miss, not
// a wrong answer).
func TestPlaceMemoIsOwned(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	m := placeMemo{entries: map[uint64][]*placeEntry{}}
	units := make([]string, 300)
	for i := range units {
		units[i] = fmt.Sprintf("s/%d", i)
	}
	sort.Strings(units)
	for round := range 200 {
		var members []placement.Member
		for i := range 3 + rng.IntN(6) {
			st := placement.StateAlive
			if rng.IntN(5) == 0 {
				st = placement.StateLeaving
			}
			members = append(members, placement.Member{Name: fmt.Sprintf("node-%d", i), State: st,
				Capacity: float64(1 + rng.IntN(3)), MaxCapacity: placement.DefaultMaxCapacity})
		}
		if round%7 == 0 {
			// in place: the slice the memo hashed now holds other units
			units[rng.IntN(len(units))] = fmt.Sprintf("s/x%d", round)
			sort.Strings(units)
		}
		for _, mb := range members {
			got, _ := m.owned(mb.Name, units, members, placement.DefaultMaxCapacity)
			if want := placement.Owned(mb.Name, units, members, placement.DefaultMaxCapacity); !slices.Equal(got, want) {
				t.Fatalf("round %d, %s: memo %v, placement.Owned %v", round, mb.Name, got, want)
			}
		}
	}
	if m.computed == 0 || m.computed >= 200*3 {
		t.Fatalf("%d placements computed for 200 views: the memo should answer the repeated calls", m.computed)
	}
}
