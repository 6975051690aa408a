package demo

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// Issue 9, item 12, with real processes: a rolling config change under
// load. Three node processes on SQLite; one at a time, a node is stopped
// (SIGTERM), a source ("audit2", the audit handler on the demo topic from
// the earliest offset) is added to its config, and it is started again.
// While only some nodes run audit2, placement must give its units to those
// nodes only (gossiped source tags): at every sample, no unit of audit2
// goes without a running owner for more than a few seconds once a node
// runs it, and no unit is held by two nodes. After every step the cluster
// converges with audit2's units included, and at the end nothing is lost
// or doubled, audit2 included.
func TestRollingSourceAdditionWithSQLite(t *testing.T) {
	const (
		added  = "audit2"
		parts  = 6
		limit  = 5 * time.Second // "a few seconds" without an owner
		settle = 20 * time.Second
	)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := startConverged(t, ctx, Config{Partitions: parts})
	defer c.Close()
	s := c.NewSampler()
	units := make([]string, parts)
	for p := range units {
		units[p] = fmt.Sprintf("%s/%d", added, p)
	}
	s.Watch(added, units, limit)
	stopSampling := sampling(ctx, s)
	defer stopSampling()
	s.Sample(ctx)
	s.Converged()

	prod, stopProducing := producing(t, ctx, c, 17)

	unowned := func() string {
		longest, bad := s.Unowned()
		return fmt.Sprintf("longest without an owner: %v; over %v: %v", longest, limit, bad)
	}
	for i, n := range c.Nodes() {
		began := time.Now()
		if err := c.Term(n, 20*time.Second); err != nil {
			t.Fatal(dumpLogs(c, err))
		}
		if err := n.ExitError(); err != nil {
			t.Errorf("%s did not exit cleanly after SIGTERM: %v", n.Name, err)
		}
		if err := c.AddAuditSource(n, added); err != nil {
			t.Fatal(err)
		}
		if err := c.StartNode(n); err != nil {
			t.Fatal(err)
		}
		// the step is done when the restarted node runs some of the new
		// source's units and the cluster converged (every unit running on
		// exactly one node, the new source's too)
		var tree ClusterTree
		why := ""
		for {
			var err error
			tree, err = c.Tree(ctx)
			switch mine := 0; {
			case err != nil:
				why = err.Error()
			case !c.Converged(tree):
				why = fmt.Sprintf("not converged: %d of %d units running once", len(tree.Running()), len(c.Units()))
			default:
				for _, u := range units {
					if tree.Running()[u] == n.Name {
						mine++
					}
				}
				why = fmt.Sprintf("%s runs %d units of %s", n.Name, mine, added)
				if mine > 0 {
					why = ""
				}
			}
			if why == "" {
				break
			}
			if time.Since(began) > settle {
				t.Fatal(dumpLogs(c, fmt.Errorf("step %d (%s restarted with %s): %s after %v; %s", i+1, n.Name, added, why, settle, unowned())))
			}
			time.Sleep(20 * time.Millisecond) // polling a condition with a deadline
		}
		run := tree.Running()
		by := map[string][]string{}
		for _, u := range units {
			by[run[u]] = append(by[run[u]], u)
		}
		t.Logf("step %d: %s restarted with %s; done %v after its stop; %s runs on %v", i+1, n.Name, added,
			time.Since(began).Round(time.Millisecond), added, by)
		// some load on the converged cluster before the next step
		more := prod.Total() + 300
		waitFor(t, ctx, "more load after the step", func() bool { return prod.Total() > more })
	}

	sent := stopProducing()
	v := drainAndVerify(t, ctx, c, sent)
	stopSampling()
	if !v.OK() || v.Produced == 0 {
		t.Errorf("%s\n%s", v.Line(), strings.Join(v.Problems, "\n"))
	}
	longest, bad := s.Unowned()
	t.Logf("%s: longest time a unit had no running owner while a node ran the source: %v (%d samples)", added, longest[added], s.Samples())
	if len(bad) > 0 {
		t.Errorf("units of %s without a running owner for more than %v: %v", added, limit, bad)
	}
	if bad := s.Violations(); len(bad) > 0 {
		t.Errorf("a unit was held by two nodes: %v", bad)
	}
	if s.Samples() < 20 {
		t.Errorf("only %d samples of the cluster tree", s.Samples())
	}
}
