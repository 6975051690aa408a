package testkit_test

import (
	"context"
	"strings"
	"testing"

	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/testkit"
)

// The simulator's wire stream meets schemas whose reference the registry
// does not have (dead letters naming the schema id and the reference) and
// reference lookups during an outage of the registry's subjects' versions
// (retried), on seeds that keep every invariant.
func TestRandomRunsWireReferences(t *testing.T) {
	missing, outages := 0, 0
	for seed := uint64(1); seed <= 30; seed++ {
		r, err := testkit.RandomRun(seed, testkit.SimOptions{Inspect: func(c *testkit.Cluster) {
			dls, err := c.Store().DeadLetters(context.Background(), persistence.DeadLetterFilter{Source: "wire"})
			if err != nil {
				t.Error(err)
			}
			for _, dl := range dls {
				if strings.Contains(dl.Reason, `: its reference "gone.json" (subject gone version 3) not found in the registry`) {
					missing++
				}
			}
		}})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range r.Steps {
			if strings.Contains(s, "fails its subjects' versions") {
				outages++
			}
		}
		if !r.OK() {
			t.Fatalf("seed %d: %s\n%s", seed, r.Line(), r.Explain())
		}
	}
	if missing < 10 || outages < 2 {
		t.Fatalf("on 30 seeds %d dead letters for a missing reference, %d outages of the reference lookups; want at least 10 and 2", missing, outages)
	}
	t.Logf("%d dead letters for a missing reference, %d outages of the reference lookups", missing, outages)
}
