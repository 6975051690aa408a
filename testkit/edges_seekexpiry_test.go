package testkit_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/testkit"
)

// The seek expiry of the controls table (issue 13 item 2, review): a seek
// no unit carries out within Tuning.SeekExpiry is marked done, expired,
// and never runs later.

// seekExpiry is the expiry of these scenarios.
const seekExpiry = 10 * time.Second

// expiryCluster is a started cluster of nodes nodes with a stream source
// "s" of one partition, its units discovered every second, and 20
// messages applied on s/0.
func expiryCluster(t *testing.T, seed uint64, nodes int) *testkit.Cluster {
	t.Helper()
	c := edgeCluster(t, testkit.Config{Seed: seed, Nodes: nodes, Tuning: actors.Tuning{SeekExpiry: seekExpiry}})
	must(c.AddStream(actors.SourceSpec{Name: "s", KeyField: "id", BatchSize: 10, Discovery: time.Second}, 1))
	mustStart(t, c)
	must(c.Publish("s", "0", upserts(20, "a")...))
	return c
}

// auditOf lists unit's audit entries whose args contain what.
func auditOf(t *testing.T, c *testkit.Cluster, unit, what string) []persistence.AuditEntry {
	t.Helper()
	as, err := c.Store().ListAudit(context.Background(), persistence.AuditFilter{Unit: unit})
	if err != nil {
		t.Fatal(err)
	}
	var out []persistence.AuditEntry
	for _, a := range as {
		if strings.Contains(a.Args, what) {
			out = append(out, a)
		}
	}
	return out
}

// A seek asked of a unit nobody holds (its partition is not there yet)
// waits past the expiry; then the partition appears, and the unit's new
// owner, before it seeks, finds the seek expired under its lease: it
// marks it done with the error and never carries it out (every message
// of the new partition applied once, its last_seek saying expired). With
// the owner's check off (mutate.ExpiredSeekApplied) it seeks the new unit
// back to earliest over 12 s after the expiry: the seek-expiry invariant
// says so.
func edgeSeekExpiresUnowned(t *testing.T) error {
	c := expiryCluster(t, 61, 2)
	if err := settle(c); err != nil {
		return err
	}
	via := c.Nodes()[0]
	row, err := c.SeekVia(via, actors.Seek{Unit: "s/1", To: "earliest", By: "ops", Reason: "rewind"})
	if err != nil {
		return err
	}
	// past the expiry and the invariant's slack, within the grace
	wait := seekExpiry + testkit.SeekExpirySlack + 2*time.Second
	c.Run(wait)
	if r := controlRow(t, c, "s/1"); !r.PendingSeek() {
		return fmt.Errorf("the seek of s/1 is done %s after it was asked, before its unit exists: %+v", wait, r)
	}
	ids := must(c.AddPartitions("s", 1))
	if len(ids) != 1 || ids[0] != "1" {
		return fmt.Errorf("added partitions %v, want [1]", ids)
	}
	must(c.Publish("s", "1", upserts(20, "b")...))
	if !c.RunUntil(func() bool { return controlRow(t, c, "s/1").SeekDoneID >= row.SeekID }, 10*time.Second) {
		return fmt.Errorf("the seek of s/1 was not marked done within 10 s of its unit's start: %+v", controlRow(t, c, "s/1"))
	}
	if err := settle(c); err != nil {
		return fmt.Errorf("after the expired seek: %w", err)
	}
	if n := c.Report().Applied; n != 40 {
		return fmt.Errorf("%d messages applied, want 40 (the expired seek must not re-apply any)", n)
	}
	owner := leaseOwner(t, c, "s/1")
	if as := auditOf(t, c, "s/1", fmt.Sprintf("id=%d expired", row.SeekID)); len(as) != 1 || as[0].Node != owner ||
		!strings.Contains(as[0].Args, "not carried out within the seek expiry 10s") {
		return fmt.Errorf("the audit of s/1's expired seek: %+v (owner %s)", as, owner)
	}
	if as := auditOf(t, c, "s/1", "position="); len(as) != 0 {
		return fmt.Errorf("the expired seek was carried out: %+v", as)
	}
	for _, s := range must(c.Tree(owner)).Sources {
		for _, u := range s.Units {
			if u.Unit == "s/1" && (u.LastSeek == nil || !strings.Contains(u.LastSeek.Error, "seek expired")) {
				return fmt.Errorf("s/1's last_seek on %s: %+v", owner, u.LastSeek)
			}
		}
	}
	return nil
}

// A seek no unit will ever carry out (a partition the source does not
// have) is marked done, expired, by the nodes' renewal rounds once it is
// older than the expiry and its grace: once, with one audit entry, among
// three nodes; the seeks of other units go on.
func edgeSeekOfNoUnitExpires(t *testing.T) error {
	c := expiryCluster(t, 62, 3)
	if err := settle(c); err != nil {
		return err
	}
	row, err := c.SeekVia(c.Nodes()[1], actors.Seek{Unit: "s/7", To: "earliest", By: "ops"})
	if err != nil {
		return err
	}
	c.Run(seekExpiry + actors.SeekExpiryGrace - time.Second)
	if r := controlRow(t, c, "s/7"); !r.PendingSeek() {
		return fmt.Errorf("the seek of s/7 was marked done before its expiry and grace: %+v", r)
	}
	if !c.RunUntil(func() bool { return controlRow(t, c, "s/7").SeekDoneID >= row.SeekID }, 5*time.Second) {
		return fmt.Errorf("the seek of s/7 (no such partition) is still pending %s after it was asked: %+v",
			seekExpiry+actors.SeekExpiryGrace+4*time.Second, controlRow(t, c, "s/7"))
	}
	c.Run(5 * time.Second) // more rounds of every node
	as := auditOf(t, c, "s/7", fmt.Sprintf("id=%d expired", row.SeekID))
	if len(as) != 1 || !strings.Contains(as[0].Args, "no owner carried it out") || as[0].By != "ops" {
		return fmt.Errorf("the audit of s/7's expired seek: %+v, want one entry", as)
	}
	// another seek, of a unit that exists, is carried out as before
	row, err = c.SeekVia(c.Nodes()[2], actors.Seek{Unit: "s/0", To: "10", By: "ops"})
	if err != nil {
		return err
	}
	if !c.RunUntil(func() bool { return controlRow(t, c, "s/0").SeekDoneID >= row.SeekID }, 5*time.Second) {
		return fmt.Errorf("the seek of s/0 was not carried out: %+v", controlRow(t, c, "s/0"))
	}
	if err := settle(c); err != nil {
		return err
	}
	if n := c.Report().Applied; n != 30 {
		return fmt.Errorf("%d messages applied, want 30 (20, and 10 again after the seek back to 10)", n)
	}
	return nil
}

// A seek pending in the controls table is told to its unit once, not at
// every renewal round: with one that no unit carries out (its partition
// is not there), 40 units on two nodes get no message from the rounds'
// reads of the table (before, every unit got one at every round: 360
// messages in 20 s). A seek of a unit that exists is told to that unit alone.
func edgeSeekToldOnce(t *testing.T) error {
	c := edgeCluster(t, testkit.Config{Seed: 63, Nodes: 2, Tuning: actors.Tuning{SeekExpiry: time.Hour}})
	must(c.AddStream(actors.SourceSpec{Name: "s", KeyField: "id", BatchSize: 10}, 40))
	mustStart(t, c)
	if err := settle(c); err != nil {
		return err
	}
	told := func() int { return len(c.Log("controls-told")) }
	before := told()
	if _, err := c.SeekVia(c.Nodes()[0], actors.Seek{Unit: "s/99", To: "earliest", By: "ops"}); err != nil {
		return err
	}
	c.Run(20 * time.Second) // renewal rounds of each node
	if n := told() - before; n != 0 {
		return fmt.Errorf("the units were told %d times of a pending seek of no unit in 20 s, want 0", n)
	}
	must(c.Publish("s", "3", upserts(10, "x")...))
	if err := settle(c); err != nil {
		return err
	}
	before = told()
	row, err := c.SeekVia(c.Nodes()[1], actors.Seek{Unit: "s/3", To: "earliest", By: "ops"})
	if err != nil {
		return err
	}
	if !c.RunUntil(func() bool { return controlRow(t, c, "s/3").SeekDoneID >= row.SeekID }, 5*time.Second) {
		return fmt.Errorf("the seek of s/3 was not carried out: %+v", controlRow(t, c, "s/3"))
	}
	c.Run(10 * time.Second)
	var units []string
	for _, e := range c.Log("controls-told")[before:] {
		units = append(units, e.Unit)
	}
	if len(units) != 1 || units[0] != "s/3" {
		return fmt.Errorf("a seek of s/3 told %v, want s/3 once", units)
	}
	return settle(c)
}

// A node whose clock runs an hour ahead of the store's does not expire a
// fresh seek: the seek's age is the store's (Control.SeekAge, and
// ExpireSeek judges it by the store's clock). The seek of a unit nobody
// holds yet waits half the expiry through every node's rounds, then the
// partition appears and its owner carries the seek out. With the age
// judged by the node's clock (mutate.SeekAgeByNodeClock) the fast node's
// first round expires it.
func edgeSeekExpiryNodeClockAhead(t *testing.T) error {
	c := edgeCluster(t, testkit.Config{Seed: 63, Nodes: 3, Tuning: actors.Tuning{SeekExpiry: seekExpiry},
		ClockAhead: map[string]time.Duration{"node-3": time.Hour}})
	must(c.AddStream(actors.SourceSpec{Name: "s", KeyField: "id", BatchSize: 10, Discovery: time.Second}, 1))
	mustStart(t, c)
	must(c.Publish("s", "0", upserts(20, "a")...))
	if err := settle(c); err != nil {
		return err
	}
	row, err := c.SeekVia(c.Nodes()[0], actors.Seek{Unit: "s/1", To: "earliest", By: "ops", Reason: "rewind"})
	if err != nil {
		return err
	}
	c.Run(seekExpiry / 2) // several renewal rounds of every node, node-3's too
	if r := controlRow(t, c, "s/1"); !r.PendingSeek() {
		return fmt.Errorf("the seek of s/1 is done %s after it was asked (node-3's clock an hour ahead): %+v; audit %+v",
			seekExpiry/2, r, auditOf(t, c, "s/1", "expired"))
	}
	must(c.AddPartitions("s", 1))
	must(c.Publish("s", "1", upserts(20, "b")...))
	if !c.RunUntil(func() bool { return controlRow(t, c, "s/1").SeekDoneID >= row.SeekID }, 10*time.Second) {
		return fmt.Errorf("the seek of s/1 was not carried out within 10 s of its unit's start: %+v", controlRow(t, c, "s/1"))
	}
	if as := auditOf(t, c, "s/1", "expired"); len(as) != 0 {
		return fmt.Errorf("the seek of s/1 expired though it was %s old by the store's clock: %+v", seekExpiry/2, as)
	}
	return settle(c)
}
