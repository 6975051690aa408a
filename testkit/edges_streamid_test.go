package testkit_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/testkit"
)

// edgeRecreatedPastCheckpoint: a node stops after applying 30 messages;
// the stream is deleted and created again and refilled with 40, past the
// old checkpoint, before the node starts again. Offsets alone cannot tell
// the new stream from the old one; the checkpoint's stream id can: the
// unit resets (on_position_reset: earliest) and applies all 40 — without
// it, it read on after offset 29 and skipped the first 30 (silently).
func edgeRecreatedPastCheckpoint(t *testing.T) error {
	c := edgeCluster(t, testkit.Config{Seed: 21, Nodes: 1})
	must(c.AddStream(actors.SourceSpec{Name: "s", KeyField: "id", BatchSize: 20, OnPositionReset: actors.ResetEarliest}, 1))
	mustStart(t, c)
	must(c.Publish("s", "0", upserts(30, "old")...))
	if err := settle(c); err != nil {
		return err
	}
	if err := c.Stop("node-1"); err != nil {
		t.Fatal(err)
	}
	c.RunUntil(func() bool { return c.Stopped("node-1") }, time.Minute)
	if err := c.RecreateStream("s"); err != nil {
		t.Fatal(err)
	}
	c.Run(12 * time.Second) // past the testkit's quiet time after a recreation
	must(c.Publish("s", "0", upserts(40, "new")...))
	if err := c.Restart("node-1"); err != nil {
		t.Fatal(err)
	}
	c.Run(30 * time.Second)
	recs := records(t, c.Store(), "s")
	var missing []string
	for i := range 40 {
		if _, ok := recs[fmt.Sprintf("new-%d", i)]; !ok {
			missing = append(missing, fmt.Sprintf("new-%d", i))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%d messages of the recreated stream not applied (%v…): its old checkpoint was taken for a position of the new one", len(missing), missing[0])
	}
	if n := len(c.Log("position-reset")); n != 1 {
		return fmt.Errorf("%d position resets, want 1: %v", n, c.Log("position-reset"))
	}
	return nil
}
