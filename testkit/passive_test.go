package testkit_test

import (
	"testing"

	"github.com/drover-dev/drover/testkit"
)

// Every seed exercises passive units (issue 12 item 5): idle units
// passivate and are spawned again from their records — woken (also by
// the safety sweep's check), stopped or told of a lost lease — and the
// invariants hold.
func TestRandomRunsPassivateUnits(t *testing.T) {
	resumed := map[string]int{}
	checks := 0
	for seed := uint64(1); seed <= 12; seed++ {
		var passivated, activated int
		r, err := testkit.RandomRun(seed, testkit.SimOptions{Inspect: func(c *testkit.Cluster) {
			passivated = len(c.Log("passivated"))
			checks += len(c.Log("wake-check")) // the safety sweep's checks, which spawn nothing
			for _, e := range c.Log("activated") {
				activated++
				resumed[e.Detail]++
			}
		}})
		if err != nil {
			t.Fatal(err)
		}
		if !r.OK() {
			t.Errorf("%s\n%s", r.Line(), r.Explain())
		}
		if passivated == 0 || activated == 0 {
			t.Errorf("seed %d: %d passivations, %d activations: no passive unit was exercised", seed, passivated, activated)
		}
	}
	for _, how := range []string{"fetch", "stop"} {
		if resumed[how] == 0 {
			t.Errorf("no passive unit was activated to %s in 12 seeds (activations: %v)", how, resumed)
		}
	}
	if checks == 0 {
		t.Error("no passive unit met the safety sweep's check in 12 seeds")
	}
	t.Logf("activations by cause: %v; safety checks: %d", resumed, checks)
}
