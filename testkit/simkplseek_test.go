package testkit_test

import (
	"strings"
	"testing"

	"github.com/drover-dev/drover/testkit"
)

// The simulator's seeks to a sub-position a kpl record does not have are
// carried out (their reset writes the sub-position) and followed by a
// reset of on_position_reset (earliest, latest) or, under fail, by the
// operator's seek once the unit waits for one, on seeds that keep every
// invariant.
func TestRandomRunsSubSeek(t *testing.T) {
	reset := map[string]int{}
	for seed := uint64(1); seed <= 80; seed++ {
		policy := ""
		r, err := testkit.RandomRun(seed, testkit.SimOptions{Log: func(s string) {
			if i := strings.Index(s, "on_position_reset "); i >= 0 && strings.Contains(s, "seek a kpl unit") {
				policy = strings.Fields(s[i:])[1]
			}
		}, Inspect: func(c *testkit.Cluster) {
			sought := map[string]string{} // kpl unit -> the sub-position a seek wrote
			waited := map[string]bool{}   // kpl units that waited for an operator
			for _, e := range c.Log("") {
				if !strings.HasPrefix(e.Unit, "kpl/") {
					continue
				}
				if e.Kind == "position-invalid" {
					waited[e.Unit] = true // on_position_reset: fail
				}
				switch from, to, ok := strings.Cut(e.Detail, " -> "); {
				case !ok:
				case e.Kind == "seek" && e.Node != "" && strings.Contains(to, "/"):
					sought[e.Unit] = to // the owner's trace: the seek carried out
				case e.Kind == "position-reset" && sought[e.Unit] == from:
					delete(sought, e.Unit)
					reset[policy]++
				case e.Kind == "seek" && e.Node != "" && sought[e.Unit] == from && policy == "fail" && waited[e.Unit]:
					delete(sought, e.Unit)
					reset[policy]++ // the operator's
				}
			}
		}})
		if err != nil {
			t.Fatal(err)
		}
		if !r.OK() {
			t.Fatalf("seed %d: %s\n%s", seed, r.Line(), r.Explain())
		}
	}
	if reset["earliest"] < 1 || reset["latest"] < 1 || reset["fail"] < 1 {
		t.Fatalf("resets after a seek to a missing sub-position on 80 seeds, by on_position_reset: %v; want some of earliest, latest and fail (the operator's)", reset)
	}
	t.Logf("resets of on_position_reset after a seek to a missing sub-position: %v", reset)
}
