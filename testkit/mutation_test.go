//go:build drover_mutate

package testkit_test

import (
	"testing"

	"github.com/drover-dev/drover/internal/mutate"
	"github.com/drover-dev/drover/testkit"
)

// Each fix of issue 9 has a switch that undoes it (internal/mutate). With
// one switch on, the simulator must break an invariant on some seed among
// its first 200: it reaches what the fix is for. The same seed must be
// clean with the switch off. Run with: go test -tags drover_mutate -run
// Mutation ./testkit/
func TestMutationsAreCaught(t *testing.T) {
	for _, name := range mutate.All {
		t.Run(name, func(t *testing.T) {
			mutate.Set(name, true)
			defer mutate.Set(name, false)
			for seed := uint64(1); seed <= 200; seed++ {
				r, err := testkit.RandomRun(seed, testkit.SimOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if r.OK() {
					continue
				}
				inv := "settle"
				if len(r.Violations) > 0 {
					inv = r.Violations[0].String()
				}
				mutate.Set(name, false)
				ok, err := testkit.RandomRun(seed, testkit.SimOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if !ok.OK() {
					t.Fatalf("seed %d fails without %s too:\n%s", seed, name, ok.Explain())
				}
				t.Logf("seed %d caught %s: %s", seed, name, inv)
				return
			}
			t.Fatalf("no seed among the first 200 breaks an invariant with %s on", name)
		})
	}
}
