package testkit

import (
	"fmt"
	"math/rand/v2"
)

// simGroup is the group commit setting of a random run.
type simGroup struct {
	on       bool // node.group_commit
	parallel int  // groups in flight (persistence.ParallelGroups)
}

// drawGroupCommit draws group commit from a source of its own, like the
// store faults of RandomRun: the rest of the scenario does not depend on
// it. On in 3 runs of 4, as it is by default, unless opt says; 1 to 3
// groups in flight (1 as SQLite, more as PostgreSQL's pool).
func drawGroupCommit(seed uint64, opt SimOptions) simGroup {
	rng := rand.New(rand.NewPCG(seed^0x9c0, seed+0x9c1))
	g := simGroup{on: rng.IntN(4) > 0}
	if opt.GroupCommit != nil {
		g.on = *opt.GroupCommit
	}
	g.parallel = 1 + rng.IntN(3)
	return g
}

func (g simGroup) String() string {
	if !g.on {
		return "group commit off: every batch is a store call of its own"
	}
	return fmt.Sprintf("group commit on, %d group(s) in flight: batches ready while the store is busy share one call", g.parallel)
}
