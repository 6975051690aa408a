package testkit_test

import (
	"context"
	"testing"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/testkit"
)

// A seek after the stream was recreated writes the new stream's position
// with the new stream id: it kept the old one (a Reset without StreamID
// keeps the stored id), so the next open refused the checkpoint it had
// just written.
func TestSeekAfterARecreationRecordsTheNewStreamID(t *testing.T) {
	c := edgeCluster(t, testkit.Config{Seed: 21, Nodes: 1})
	must(c.AddStream(actors.SourceSpec{Name: "s", KeyField: "id", BatchSize: 20, OnPositionReset: actors.ResetFail}, 1))
	mustStart(t, c)
	must(c.Publish("s", "0", upserts(30, "old")...))
	if err := settle(c); err != nil {
		t.Fatal(err)
	}
	before, _ := c.Store().Checkpoint(context.Background(), "s/0")
	must0(t, c.Stop("node-1"))
	c.RunUntil(func() bool { return c.Stopped("node-1") }, time.Minute)
	must0(t, c.RecreateStream("s"))
	c.Run(12 * time.Second)
	must(c.Publish("s", "0", upserts(40, "new")...))
	must0(t, c.Restart("node-1"))
	c.Run(30 * time.Second)
	if n := len(c.Log("position-invalid")); n == 0 {
		t.Fatalf("the unit did not stop on the old stream's checkpoint")
	}
	if _, err := seekNow(t, c, actors.Seek{Unit: "s/0", To: "earliest", By: "ops"}); err != nil {
		t.Fatal(err)
	}
	c.Run(30 * time.Second)
	after, _ := c.Store().Checkpoint(context.Background(), "s/0")
	t.Logf("checkpoint before recreate %q id %q; after seek %q id %q", before.Position, before.StreamID, after.Position, after.StreamID)
	invalid := len(c.Log("position-invalid"))
	must0(t, c.Stop("node-1"))
	c.RunUntil(func() bool { return c.Stopped("node-1") }, time.Minute)
	must0(t, c.Restart("node-1"))
	c.Run(30 * time.Second)
	if n := len(c.Log("position-invalid")); n > invalid {
		t.Fatalf("after the seek and a restart the unit stopped again on the checkpoint the seek wrote (%d more position-invalid): stream id %q kept from the old stream", n-invalid, after.StreamID)
	}
	if after.StreamID == before.StreamID && before.StreamID != "" {
		t.Fatalf("seek on the recreated stream kept the old stream id %q", after.StreamID)
	}
}

func must0(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
