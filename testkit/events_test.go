package testkit_test

import (
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/actors/events"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/testkit"
)

// After a kill, each unit the victim held is in its new owner's event log:
// assigned to it by placement, then taken over from the victim with the
// victim's token and the next one; the graceful stop of another node
// logs its given_up and released, and its successor's plain acquisition.
func TestEventsExplainAKillAndAHandover(t *testing.T) {
	c := newCluster(t, testkit.Config{Seed: 11, Nodes: 3, Detection: time.Second})
	must(c.AddStream(actors.SourceSpec{Name: "orders", KeyField: "id", BatchSize: 50}, 6))
	mustStart(t, c)
	publishKeyed(c, testkit.NewWorkload(4), "orders", 6, 600, 20, 4*time.Second, map[string][]brokers.Message{})
	c.Run(2 * time.Second)
	victim := "node-2"
	tr := must(c.Tree(victim))
	held := map[string]int64{}
	for _, u := range tr.Sources[0].Units {
		held[u.Unit] = u.LeaseToken
	}
	if len(held) == 0 {
		t.Fatal("node-2 holds nothing")
	}
	if err := c.Kill(victim); err != nil {
		t.Fatal(err)
	}
	c.Run(4 * time.Second)
	mustSettle(t, c, time.Minute)
	owners := c.Owners()
	for unit, token := range held {
		owner := owners[unit][0]
		es := c.EventLog(owner).Query(events.Filter{Unit: unit})
		assigned, took := -1, -1
		for i, e := range es {
			switch {
			case e.Kind == events.KindAssigned && e.Members > 0:
				assigned = i
			case e.Kind == events.KindTakeover:
				took = i
				if e.PrevOwner != victim || e.PrevToken != token || e.Token != token+1 || e.Node != owner ||
					!strings.Contains(e.Reason, victim+" (token") {
					t.Errorf("%s: takeover %+v, want from %s token %d to token %d on %s", unit, e, victim, token, token+1, owner)
				}
			}
		}
		if assigned < 0 || took < assigned {
			t.Errorf("%s on %s: want assigned, then takeover; log %+v", unit, owner, es)
		}
	}

	// a graceful stop hands over: given_up and released on the old owner
	// (its log as it stopped), a plain acquired (no takeover) on the new
	stopper := "node-3"
	log3 := c.EventLog(stopper)
	var moved string
	for u, os := range c.Owners() {
		if os[0] == stopper {
			moved = u
		}
	}
	if moved == "" {
		t.Fatal("node-3 holds nothing")
	}
	if err := c.Stop(stopper); err != nil {
		t.Fatal(err)
	}
	if !c.RunUntil(func() bool { return c.Stopped(stopper) }, 10*time.Second) {
		t.Fatal("node-3 did not stop")
	}
	mustSettle(t, c, time.Minute)
	kinds := func(l *events.Log, unit string) string {
		var ks []string
		for _, e := range l.Query(events.Filter{Unit: unit}) {
			ks = append(ks, e.Kind)
		}
		return strings.Join(ks, " ")
	}
	if k := kinds(log3, moved); !strings.HasSuffix(k, "given_up released") {
		t.Errorf("%s on the stopped node: %s, want it to end with given_up released", moved, k)
	}
	now := c.Owners()[moved][0]
	if k := kinds(c.EventLog(now), moved); !strings.HasSuffix(k, "assigned acquired") {
		t.Errorf("%s on its new owner %s: %s, want it to end with assigned acquired", moved, now, k)
	}
}
