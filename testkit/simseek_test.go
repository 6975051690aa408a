package testkit_test

import (
	"context"
	"strings"
	"testing"

	"github.com/drover-dev/drover/testkit"
)

// The simulator's seeks are carried out (not all refused), on seeds that
// keep every invariant: the re-applies they ask for are allowed and
// happen; some go through the control row and are marked done there.
func TestRandomRunsSeek(t *testing.T) {
	done, refused, viaRow := 0, 0, 0
	for seed := uint64(1); seed <= 20; seed++ {
		r, err := testkit.RandomRun(seed, testkit.SimOptions{Inspect: func(c *testkit.Cluster) {
			for _, e := range c.Log("sought") {
				if strings.Contains(e.Detail, " -> ") {
					done++
				} else {
					refused++
				}
			}
			cs, err := c.Store().ListControls(context.Background())
			if err != nil {
				t.Error(err)
			}
			for _, r := range cs {
				if r.SeekDoneID > 0 && r.SeekDoneID == r.SeekID {
					viaRow += int(r.SeekDoneID)
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
	if done < 3 || viaRow < 2 {
		t.Fatalf("%d seeks carried out by their owner on 20 seeds (%d refused), %d through the control row; want at least 3 and 2", done, refused, viaRow)
	}
	t.Logf("%d seeks carried out by their owner, %d refused, %d through the control row", done, refused, viaRow)
}
