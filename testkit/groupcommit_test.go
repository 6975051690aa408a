package testkit_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/internal/exec"
	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/testkit"
)

// groupRun runs one node's stream of 8 partitions and queue of 3 slots
// under load until it settles, with group commit on or off, and returns
// the cluster.
func groupRun(t *testing.T, alone bool) *testkit.Cluster {
	t.Helper()
	c := newCluster(t, testkit.Config{Seed: 12, Nodes: 1, ApplyAlone: alone})
	must(c.AddStream(actors.SourceSpec{Name: "orders", KeyField: "id", BatchSize: 20, MaxWait: 100 * time.Millisecond}, 8))
	must(c.AddQueue(actors.SourceSpec{Name: "jobs", KeyField: "id", Slots: 3, BatchSize: 10, MaxWait: 100 * time.Millisecond}, 5*time.Second))
	mustStart(t, c)
	wl := testkit.NewWorkload(5)
	for i := 0; i < 40; i++ {
		must(c.Publish("orders", fmt.Sprint(i%8), wl.Batch(15)...))
		must(c.Publish("jobs", "", wl.Batch(8)...))
		c.Run(30 * time.Millisecond)
	}
	mustSettle(t, c, time.Minute)
	checkReport(t, c)
	return c
}

// Units of one node whose batches are ready while the store is busy share
// store calls (ApplyGroup), and every invariant holds (nothing lost or
// applied twice, order per unit, one applier per token); with group
// commit off no batch goes through ApplyGroup.
func TestGroupCommitSharesStoreCalls(t *testing.T) {
	grouped := groupRun(t, false)
	alone := groupRun(t, true)
	if grouped.Groups() == 0 || len(grouped.Log("group-commit")) == 0 {
		t.Fatalf("no group of batches was applied (%d ApplyGroup calls)", grouped.Groups())
	}
	if alone.Groups() != 0 || len(alone.Log("group-commit")) != 0 {
		t.Errorf("with group commit off: %d ApplyGroup calls", alone.Groups())
	}
	for _, table := range []string{"orders", "jobs"} {
		if len(records(t, grouped.Store(), table)) == 0 {
			t.Errorf("%s: no records with group commit", table)
		}
	}
}

// Random scenarios keep every invariant with group commit on, and groups
// form in them.
func TestRandomRunsWithGroupCommit(t *testing.T) {
	on := true
	groups := 0
	for seed := uint64(101); seed <= 112; seed++ {
		r, err := testkit.RandomRun(seed, testkit.SimOptions{GroupCommit: &on, Inspect: func(c *testkit.Cluster) { groups += c.Groups() }})
		if err != nil {
			t.Fatal(err)
		}
		if !r.OK() {
			t.Errorf("%s\n%s", r.Line(), r.Explain())
		}
	}
	if groups == 0 {
		t.Error("no group of batches formed in 12 random runs")
	}
}

// A slow handler holds up only its own unit: with group commit on (the
// memory store applies one group at a time), another unit of the node
// still applies its batch while the first one's handler takes 5 s. Fails
// when a handler's batch goes through the committer: the second unit's
// batch then waits in the queue behind it.
func TestSlowHandlerDoesNotHoldUpOtherUnits(t *testing.T) {
	c := newCluster(t, testkit.Config{Seed: 3, Nodes: 1})
	var started bool
	var otherAt time.Time
	handler := func(ctx context.Context, _ persistence.Tx, b actors.Batch) error {
		if b.Unit == "s/0" && !started {
			started = true
			return exec.Pause(ctx, 5*time.Second)
		}
		if b.Unit == "s/1" && otherAt.IsZero() {
			otherAt = c.Now()
		}
		return nil
	}
	must(c.AddStream(actors.SourceSpec{Name: "s", BatchSize: 5, MaxWait: 50 * time.Millisecond, Handler: handler}, 2))
	mustStart(t, c)
	must(c.Publish("s", "0", upserts(3, "slow")...))
	c.Run(500 * time.Millisecond) // s/0's handler is in its pause now
	if !started {
		t.Fatal("s/0's handler did not run within 500 ms")
	}
	at := c.Now()
	must(c.Publish("s", "1", upserts(3, "other")...))
	c.Run(2 * time.Second)
	if otherAt.IsZero() {
		t.Fatalf("s/1's batch was not handled within 2 s of its publish (at %s) while s/0's handler paused", at.Format(time.StampMilli))
	}
}
