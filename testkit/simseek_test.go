package testkit_test

import (
	"strings"
	"testing"

	"github.com/drover-dev/drover/testkit"
)

// The simulator's seeks are carried out (not all refused), on seeds that
// keep every invariant: the re-applies they ask for are allowed and
// happen.
func TestRandomRunsSeek(t *testing.T) {
	done, refused := 0, 0
	for seed := uint64(1); seed <= 20; seed++ {
		r, err := testkit.RandomRun(seed, testkit.SimOptions{Inspect: func(c *testkit.Cluster) {
			for _, e := range c.Log("sought") {
				if strings.Contains(e.Detail, " -> ") {
					done++
				} else {
					refused++
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
	if done < 3 {
		t.Fatalf("%d seeks carried out on 20 seeds (%d refused), want at least 3", done, refused)
	}
	t.Logf("%d seeks carried out, %d refused", done, refused)
}
