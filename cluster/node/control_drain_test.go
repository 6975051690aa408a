package node

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/cluster/debug"
	"github.com/drover-dev/drover/persistence"
)

// Drain on two real nodes: the drained node hands every unit over (zero
// units on it, the other owns them all, no message applied twice or
// lost), stays up showing itself leaving, answers a second drain and an
// undrain of an undrained node without changing anything, takes units
// again when undrained, and exit asks its owner to shut it down.
func TestDrainUndrainExit(t *testing.T) {
	p := startPair(t, auditSource("m", 4, ""))
	n1, n2, url, streams := p.nodes[0], p.nodes[1], p.url, p.streams
	eventually(t, "both nodes own units", func() bool {
		k1, k2 := len(unitsOf(n1, "m")), len(unitsOf(n2, "m"))
		return k1 > 0 && k2 > 0 && k1+k2 == 4
	})
	streams.produce(t, "m", 4, 0, 200)
	eventually(t, "200 applied", func() bool { r, _ := audited(t, url, "m"); return r >= 200 })

	ctx := t.Context()
	rep, err := n1.Control(ctx, debug.ControlRequest{Action: debug.ActionDrain, By: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(unitsOf(n1, "m")); got != 0 {
		t.Fatalf("drain answered %q with %d units still on n1", rep.Detail, got)
	}
	if !strings.HasPrefix(rep.Detail, "drained") {
		t.Errorf("drain detail %q", rep.Detail)
	}
	tr := n1.Tree()
	if !tr.Drained {
		t.Error("n1's tree does not say drained")
	}
	for _, m := range tr.Members {
		if m.Name == "n1" && m.State != "leaving" {
			t.Errorf("n1's tree shows itself %q, want leaving", m.State)
		}
	}
	eventually(t, "n2 runs all 4 units", func() bool { return runningAll(n2, "m", 4) })
	eventually(t, "n2 sees n1 leaving", func() bool {
		for _, m := range n2.Tree().Members {
			if m.Name == "n1" {
				return m.State == "leaving"
			}
		}
		return false
	})
	streams.produce(t, "m", 4, 200, 200)
	eventually(t, "400 applied", func() bool { r, _ := audited(t, url, "m"); return r >= 400 })
	if got := len(unitsOf(n1, "m")); got != 0 {
		t.Fatalf("a drained node took %d units", got)
	}

	// idempotent: a second drain changes nothing and says so
	rep, err = n1.Control(ctx, debug.ControlRequest{Action: debug.ActionDrain})
	if err != nil || !strings.HasPrefix(rep.Detail, "already drained") {
		t.Fatalf("second drain: %q, %v", rep.Detail, err)
	}
	rep, err = n2.Control(ctx, debug.ControlRequest{Action: debug.ActionUndrain})
	if err != nil || !strings.HasPrefix(rep.Detail, "not drained") {
		t.Fatalf("undrain of a node not drained: %q, %v", rep.Detail, err)
	}
	if _, err := n1.Control(ctx, debug.ControlRequest{Action: debug.ActionDrain, Unit: "m/0"}); !errors.Is(err, debug.ErrBadControl) {
		t.Fatalf("drain of a unit: %v, want ErrBadControl", err)
	}

	if _, err := n1.Control(ctx, debug.ControlRequest{Action: debug.ActionUndrain}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "n1 owns units again", func() bool {
		k1, k2 := len(unitsOf(n1, "m")), len(unitsOf(n2, "m"))
		return k1 > 0 && k1+k2 == 4 && runningAll(n1, "m", k1)
	})
	if n1.Tree().Drained {
		t.Error("n1's tree still says drained")
	}
	streams.produce(t, "m", 4, 400, 200)
	eventually(t, "600 applied", func() bool { r, _ := audited(t, url, "m"); return r >= 600 })

	select {
	case <-n1.ExitRequested():
		t.Fatal("exit requested before anyone asked")
	default:
	}
	if _, err := n1.Control(ctx, debug.ControlRequest{Action: debug.ActionExit}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-n1.ExitRequested():
	case <-time.After(5 * time.Second):
		t.Fatal("exit did not reach the node's owner")
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := n1.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	if _, err := n1.Control(ctx, debug.ControlRequest{Action: debug.ActionDrain}); !errors.Is(err, debug.ErrControlConflict) {
		t.Fatalf("drain of a stopped node: %v, want ErrControlConflict", err)
	}
	eventually(t, "n2 runs all 4 units after n1 left", func() bool { return runningAll(n2, "m", 4) })
	// the audit table holds what was carried out: drain, undrain, exit
	// (the second drain changed nothing and is not there)
	as, err := n2.store.ListAudit(ctx, persistence.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range as {
		got = append(got, a.Node+":"+a.Action+":"+a.By)
	}
	if want := []string{"n1:drain:test", "n1:undrain:", "n1:exit:"}; !slices.Equal(got, want) {
		t.Errorf("audit entries %v, want %v", got, want)
	}
	streams.produce(t, "m", 4, 600, 100)
	eventually(t, "700 applied", func() bool { r, _ := audited(t, url, "m"); return r >= 700 })
	if rows, distinct := audited(t, url, "m"); rows != 700 || distinct != 700 {
		t.Fatalf("audit: %d rows, %d distinct; want 700 each (no loss, no duplicate)", rows, distinct)
	}
}
