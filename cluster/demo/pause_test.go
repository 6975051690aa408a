package demo

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/drover-dev/drover/actors"
)

// Issue 13's acceptance, across processes: `drover pause` sent to one
// node pauses a unit another node owns (it reads the controls table); the
// owner is killed -9 and the unit's new owner keeps it paused, applying
// nothing, while the other units go on; `drover resume` sent to a third
// node lets it continue from its checkpoint, and at the end nothing is
// lost or applied twice.
func TestPauseSurvivesKillAcrossProcesses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := startConverged(t, ctx, Config{Partitions: 4})
	defer c.Close()
	_, stopProducing := producing(t, ctx, c, 13)

	const unit = "orders/1"
	// where returns the node holding unit (running or paused, with a
	// lease) and its entry, and the position of orders/0.
	where := func() (string, actors.UnitStatus, string) {
		tr, err := c.Tree(ctx)
		if err != nil {
			return "", actors.UnitStatus{}, ""
		}
		node, entry, other := "", actors.UnitStatus{}, ""
		for _, nt := range tr.Nodes {
			for _, s := range nt.Sources {
				for _, u := range s.Units {
					if u.LeaseToken == 0 || (u.State != actors.StateRunning && u.State != actors.StatePaused) {
						continue
					}
					switch u.Unit {
					case unit:
						node, entry = nt.Node, u
					case "orders/0":
						other = u.Position
					}
				}
			}
		}
		return node, entry, other
	}
	control := func(action string, via *Node) {
		t.Helper()
		out, err := exec.CommandContext(ctx, binary, action, unit, "--addr", via.DebugAddr, "--by", "test", "--reason", "acceptance").CombinedOutput()
		if err != nil {
			t.Fatalf("drover %s %s via %s: %v\n%s", action, unit, via.Name, err, out)
		}
		t.Logf("drover %s: %s", action, out)
	}
	waitFor(t, ctx, unit+" held", func() bool { n, _, _ := where(); return n != "" })
	owner, _, _ := where()
	var via, third *Node
	for _, n := range c.Nodes() {
		switch {
		case n.Name == owner:
		case via == nil:
			via = n
		default:
			third = n
		}
	}
	control("pause", via)
	waitFor(t, ctx, unit+" paused on its owner "+owner, func() bool {
		n, u, _ := where()
		return n == owner && u.State == actors.StatePaused
	})
	_, u, _ := where()
	pos := u.Position

	on, _ := c.Node(owner)
	if err := c.Kill(on); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, unit+" paused on another node", func() bool {
		n, u, _ := where()
		return n != "" && n != owner && u.State == actors.StatePaused
	})
	_, _, ref := where()
	waitFor(t, ctx, "orders/0 going on", func() bool { _, _, o := where(); return o != "" && o != ref })
	if n, u, _ := where(); u.Position != pos || u.State != actors.StatePaused {
		t.Fatalf("%s on %s: %s at %s, want paused at %s", unit, n, u.State, u.Position, pos)
	}

	control("resume", third)
	waitFor(t, ctx, unit+" going on after resume", func() bool {
		_, u, _ := where()
		return u.State == actors.StateRunning && u.Position != pos
	})
	if err := c.StartNode(on); err != nil {
		t.Fatal(err)
	}
	sent := stopProducing()
	if v := drainAndVerify(t, ctx, c, sent); !v.OK() || v.Produced == 0 {
		t.Errorf("%s\n%v", v.Line(), v.Problems)
	}
}
