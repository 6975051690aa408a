package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-dev/drover/persistence/stores"
)

// Issue 13, item 4, with real processes: three node processes on SQLite
// under load; on each in turn, its config gets a source added ("audit2"),
// one removed ("scratch") and one changed ("audit", a setting of it), and
// `drover reload` (SIGHUP on the last node) applies it without a restart. Then a broken file on
// node-1: `drover reload` exits 2 naming the field and nothing changes.
// At the end nothing is lost or doubled (orders, audit and audit2 by the
// verifier, scratch by its audit rows) and no unit was held by two nodes.
func TestReloadAddRemoveChangeWithSQLite(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := startWithScratch(t, ctx)
	defer c.Close()
	s := c.NewSampler()
	stopSampling := sampling(ctx, s)
	defer stopSampling()
	waitFor(t, ctx, "scratch's units running", func() bool { return runningOf(ctx, c, "scratch") == 6 })
	prod, stopProducing := producing(t, ctx, c, 23)

	for i, n := range c.Nodes() {
		if err := c.AddAuditSource(n, "audit2"); err != nil {
			t.Fatal(err)
		}
		if err := c.SetExtra(n, ""); err != nil {
			t.Fatal(err)
		}
		if err := c.ChangeAuditSource(n, "    max_consecutive_failures: 7\n"); err != nil {
			t.Fatal(err)
		}
		var out string
		if i == len(c.Nodes())-1 {
			// the last by SIGHUP: the outcome shows in its tree
			if err := syscall.Kill(n.Pid(), syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
			waitFor(t, ctx, n.Name+"'s reload in its tree", func() bool {
				tr, err := GetTree(ctx, n.DebugAddr, false)
				if err != nil || tr.Nodes[0].Reload == nil {
					return false
				}
				r := tr.Nodes[0].Reload
				out = fmt.Sprintf("SIGHUP: %+v", *r)
				return r.OK && slices.Equal(r.Added, []string{"audit2"}) && slices.Equal(r.Removed, []string{"scratch"}) && slices.Equal(r.Changed, []string{"audit"})
			})
		} else {
			var code int
			out, code = drover(t, "reload", "--addr", "http://"+n.DebugAddr)
			if code != 0 || !strings.Contains(out, "added audit2") || !strings.Contains(out, "removed scratch") || !strings.Contains(out, "changed audit") {
				t.Fatal(dumpLogs(c, fmt.Errorf("reload of %s: exit %d: %s", n.Name, code, out)))
			}
		}
		waitFor(t, ctx, fmt.Sprintf("converged after %s's reload", n.Name), func() bool {
			tr, err := c.Tree(ctx)
			return err == nil && c.Converged(tr)
		})
		t.Logf("step %d: %s reloaded: %s", i+1, n.Name, strings.TrimSpace(out))
		more := prod.Total() + 300
		waitFor(t, ctx, "more load after the step", func() bool { return prod.Total() > more })
	}
	if k := runningOf(ctx, c, "scratch"); k != 0 {
		t.Errorf("scratch still runs %d units after every node removed it", k)
	}

	// a broken file changes nothing: exit 2 naming the field
	n1 := c.Nodes()[0]
	before := nodeSources(t, ctx, n1)
	good, err := os.ReadFile(n1.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(n1.ConfigPath, append(bytes.Clone(good), "bogus_section: 1\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := drover(t, "reload", "--addr", "http://"+n1.DebugAddr)
	if code != 2 || !strings.Contains(out, "bogus_section") {
		t.Errorf("reload of a broken file: exit %d (want 2): %s", code, out)
	}
	if got := nodeSources(t, ctx, n1); !slices.Equal(got, before) {
		t.Errorf("a broken file changed node-1's sources: %v, were %v", got, before)
	}
	if tr, err := GetTree(ctx, n1.DebugAddr, false); err != nil || tr.Nodes[0].Reload == nil || tr.Nodes[0].Reload.OK ||
		!strings.Contains(tr.Nodes[0].Reload.Error, "bogus_section") {
		t.Errorf("node-1's tree does not show the failed reload: %+v, %v", tr, err)
	}
	if err := os.WriteFile(n1.ConfigPath, good, 0o644); err != nil {
		t.Fatal(err)
	}

	verifyEnd(t, ctx, c, s, stopProducing, stopSampling)
	rows, distinct := auditRows(t, ctx, c, "scratch")
	if rows == 0 || rows != distinct {
		t.Errorf("scratch: %d audit rows, %d distinct: want some, none twice", rows, distinct)
	}
}

// Issue 13, item 3, with real processes: `drover drain` on node-2 under
// load leaves it with zero units, the others own them all, and it stays
// up showing itself leaving; `drover undrain` brings it back; exit stops
// it with status 0. Nothing is lost or doubled.
func TestDrainUndrainWithSQLite(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := startConverged(t, ctx, Config{Partitions: 6})
	defer c.Close()
	s := c.NewSampler()
	stopSampling := sampling(ctx, s)
	defer stopSampling()
	prod, stopProducing := producing(t, ctx, c, 29)
	n2, _ := c.Node("node-2")

	out, code := drover(t, "drain", "--addr", "http://"+n2.DebugAddr)
	if code != 0 || !strings.Contains(out, "drained") {
		t.Fatal(dumpLogs(c, fmt.Errorf("drain: exit %d: %s", code, out)))
	}
	tr, err := GetTree(ctx, n2.DebugAddr, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range tr.Nodes[0].Sources {
		if len(src.Units) > 0 {
			t.Errorf("drained node-2 still lists %d units of %s", len(src.Units), src.Name)
		}
	}
	waitFor(t, ctx, "the others run every unit", func() bool {
		tr, err := c.Tree(ctx)
		if err != nil || !c.Converged(tr) {
			return false
		}
		for _, node := range tr.Running() {
			if node == "node-2" {
				return false
			}
		}
		for _, n := range tr.Nodes {
			for _, m := range n.Members {
				if m.Name == "node-2" && m.State != "leaving" {
					return false
				}
			}
		}
		return true
	})
	more := prod.Total() + 300
	waitFor(t, ctx, "load while node-2 is drained", func() bool { return prod.Total() > more })
	if out, code := drover(t, "drain", "--addr", "http://"+n2.DebugAddr); code != 0 || !strings.Contains(out, "already drained") {
		t.Errorf("second drain: exit %d: %s", code, out)
	}

	if out, code := drover(t, "undrain", "--addr", "http://"+n2.DebugAddr); code != 0 {
		t.Fatalf("undrain: exit %d: %s", code, out)
	}
	waitFor(t, ctx, "node-2 runs units again", func() bool {
		tr, err := c.Tree(ctx)
		if err != nil || !c.Converged(tr) {
			return false
		}
		for _, node := range tr.Running() {
			if node == "node-2" {
				return true
			}
		}
		return false
	})
	more = prod.Total() + 300
	waitFor(t, ctx, "load after the undrain", func() bool { return prod.Total() > more })

	if out, code := drover(t, "exit", "--addr", "http://"+n2.DebugAddr); code != 0 {
		t.Fatalf("exit: exit %d: %s", code, out)
	}
	waitFor(t, ctx, "node-2's process ends", func() bool { return !n2.Running() })
	if err := n2.ExitError(); err != nil {
		t.Errorf("node-2 did not exit with status 0 after exit: %v", err)
	}

	verifyEnd(t, ctx, c, s, stopProducing, stopSampling)
}

// verifyEnd stops the producer, waits until the cluster applied what it
// sent, stops the sampler and fails t unless nothing was lost or doubled
// and no unit was held by two nodes.
func verifyEnd(t *testing.T, ctx context.Context, c *Cluster, s *Sampler, stopProducing func() Produced, stopSampling func()) {
	t.Helper()
	v := drainAndVerify(t, ctx, c, stopProducing())
	stopSampling()
	if !v.OK() || v.Produced == 0 {
		t.Errorf("%s\n%s", v.Line(), strings.Join(v.Problems, "\n"))
	}
	if bad := s.Violations(); len(bad) > 0 {
		t.Errorf("a unit was held by two nodes: %v", bad)
	}
}

// startWithScratch starts a converged 3-node cluster of 6 partitions
// whose nodes also run "scratch" (the audit handler on the demo topic).
func startWithScratch(t *testing.T, ctx context.Context) *Cluster {
	t.Helper()
	return startConvergedWith(t, ctx, Config{Partitions: 6}, func(c *Cluster, n *Node) error {
		return c.SetExtra(n, c.auditConfig("scratch", "    start: earliest\n"))
	})
}

// runningOf counts the running units of source in the cluster tree.
func runningOf(ctx context.Context, c *Cluster, source string) int {
	tr, err := c.Tree(ctx)
	if err != nil {
		return -1
	}
	k := 0
	for u := range tr.Running() {
		if strings.HasPrefix(u, source+"/") {
			k++
		}
	}
	return k
}

// nodeSources are the sources n's own tree lists.
func nodeSources(t *testing.T, ctx context.Context, n *Node) []string {
	t.Helper()
	tr, err := GetTree(ctx, n.DebugAddr, false)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range tr.Nodes[0].Sources {
		out = append(out, s.Name)
	}
	slices.Sort(out)
	return out
}

// auditRows counts source's rows in drover_audit, and the distinct
// (unit, position) among them.
func auditRows(t *testing.T, ctx context.Context, c *Cluster, source string) (rows, distinct int) {
	t.Helper()
	err := stores.Query(ctx, c.StoreURL(),
		`SELECT count(*), count(DISTINCT unit || '@' || position) FROM drover_audit WHERE source = $1`, []any{source},
		func(scan func(...any) error) error { return scan(&rows, &distinct) })
	if err != nil {
		t.Fatal(err)
	}
	return rows, distinct
}

// drover runs the drover binary with args and returns its combined
// output and exit status.
func drover(t *testing.T, args ...string) (string, int) {
	t.Helper()
	out, err := exec.Command(binary, args...).CombinedOutput()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return string(out), 0
}
