package testkit_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/testkit"
)

// controlRow is unit's control row in c's store.
func controlRow(t *testing.T, c *testkit.Cluster, unit string) persistence.Control {
	t.Helper()
	cs, err := c.Store().ListControls(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range cs {
		if r.Unit == unit {
			return r
		}
	}
	return persistence.Control{}
}

// Issue 13 item 2. A seek asked through a node that does not own the
// unit goes through its control row: the owner picks it up within a
// renewal round and carries it out once (exactly the 100 messages after
// the new checkpoint applied again, checked message by message by the
// ledger), marking the row done with the checkpoint. A stale view of the
// table (read before that commit) does not start it again on the owner
// (it remembers) nor, once the owner stops and the unit moves, on its
// next owner (it reads the row under its lease first).
// A seek the broker refuses (past the end) is marked done too, its error
// in last_seek and the audit table, and changes nothing. With the row
// never marked done (mutate.SeekNeverDone) the owner seeks again at every
// renewal round.
func edgeSeekViaRow(t *testing.T) error {
	c := edgeCluster(t, testkit.Config{Seed: 43, Nodes: 3})
	must(c.AddStream(actors.SourceSpec{Name: "s", KeyField: "id", BatchSize: 10}, 1))
	mustStart(t, c)
	must(c.Publish("s", "0", upserts(300, "a")...))
	if err := settle(c); err != nil {
		return err
	}
	owner := leaseOwner(t, c, "s/0")
	via := ""
	for _, n := range c.Nodes() {
		if n != owner {
			via = n
			break
		}
	}
	if owner == "" || via == "" {
		return fmt.Errorf("owner %q of s/0, no other node", owner)
	}
	applied := c.Report().Applied
	row, err := c.SeekVia(via, actors.Seek{Unit: "s/0", To: "200", By: "ops", Reason: "bad deploy"})
	if err != nil {
		return err
	}
	if !c.RunUntil(func() bool { return controlRow(t, c, "s/0").SeekDoneID >= row.SeekID }, 30*time.Second) {
		return fmt.Errorf("the seek asked via %s (id %d) was not marked done in 30 s: row %+v", via, row.SeekID, controlRow(t, c, "s/0"))
	}
	if err := settle(c); err != nil {
		return fmt.Errorf("after the seek via %s: %w", via, err)
	}
	if n := c.Report().Applied - applied; n != 100 {
		return fmt.Errorf("a seek back 100 via the control row applied %d messages again, want exactly 100", n)
	}
	tree := must(c.Tree(owner))
	if ls := tree.Sources[0].Units[0].LastSeek; ls == nil || ls.ID != row.SeekID || ls.Position != "199" || ls.From != "299" || ls.By != "ops" {
		return fmt.Errorf("owner %s's last_seek %+v", owner, ls)
	}
	// a view read before the seek's commit, applied after it: the owner
	// knows it carried the seek out
	stale := []persistence.Control{row}
	must(0, c.ApplyControls(owner, stale))
	c.Run(time.Second)
	if err := settle(c); err != nil {
		return fmt.Errorf("after a stale view on the owner: %w", err)
	}
	if n := c.Report().Applied - applied; n != 100 {
		return fmt.Errorf("after a stale view on the owner %d messages applied again, want the seek's 100 only", n)
	}
	// the unit moves: its next owner reads the row done, and with a stale
	// view (read before the commit) reads it again under its lease
	must(0, c.Stop(owner))
	if !c.RunUntil(func() bool { o := leaseOwner(t, c, "s/0"); return o != "" && o != owner }, time.Minute) {
		return errors.New("s/0 did not move in a minute")
	}
	c.Run(20 * time.Second) // renewal rounds of the new owner
	must(0, c.ApplyControls(leaseOwner(t, c, "s/0"), stale))
	c.Run(time.Second)
	if err := settle(c); err != nil {
		return fmt.Errorf("after the move: %w", err)
	}
	if n := c.Report().Applied - applied; n != 100 {
		return fmt.Errorf("after the move %d messages applied again, want the seek's 100 only", n)
	}

	// refused: marked done, its error recorded, nothing moved
	newOwner := leaseOwner(t, c, "s/0")
	row, err = c.SeekVia(via, actors.Seek{Unit: "s/0", To: "after:900", By: "ops"})
	if err != nil {
		return err
	}
	if !c.RunUntil(func() bool { return controlRow(t, c, "s/0").SeekDoneID >= row.SeekID }, 30*time.Second) {
		return fmt.Errorf("the refused seek (id %d) was not marked done in 30 s", row.SeekID)
	}
	c.RunUntil(func() bool { // the unit records it once its job is back
		ls := must(c.Tree(newOwner)).Sources[0].Units[0].LastSeek
		return ls != nil && ls.ID == row.SeekID
	}, 5*time.Second)
	if cp := checkpointOf(t, c, "s/0"); cp != "299" {
		return fmt.Errorf("checkpoint %s after a refused seek, want 299", cp)
	}
	tree = must(c.Tree(newOwner))
	if ls := tree.Sources[0].Units[0].LastSeek; ls == nil || ls.ID != row.SeekID || ls.Error == "" {
		return fmt.Errorf("last_seek after a refused seek: %+v", ls)
	}
	as, err := c.Store().ListAudit(context.Background(), persistence.AuditFilter{Unit: "s/0"})
	if err != nil {
		return err
	}
	if len(as) == 0 || !strings.Contains(as[len(as)-1].Args, fmt.Sprintf("id=%d refused", row.SeekID)) {
		return fmt.Errorf("audit after a refused seek: %+v", as)
	}
	if n := c.Report().Applied - applied; n != 100 {
		return fmt.Errorf("a refused seek applied %d more", n-100)
	}
	return settle(c)
}
