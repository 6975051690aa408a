package demo

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/persistence/postgres/pgtest"
)

// The store goes away under load (the throwaway PostgreSQL is stopped as a
// crash would): units go to "retrying" with the store's error in the tree,
// nothing is lost, and everything resumes when the store is back.
func TestStoreOutage(t *testing.T) {
	local := pgtest.NewLocal()
	t.Cleanup(func() { _ = local.Close() })
	url := local.URL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := startConverged(t, ctx, Config{StoreURL: url, Nodes: 2, Partitions: 4})
	defer c.Close()
	prod, err := c.NewProducer(11)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	pctx, stopProducing := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	var perr error
	go func() { defer wg.Done(); perr = prod.Run(pctx, 200) }()
	waitFor(t, ctx, "messages applied before the outage", func() bool { return applied(c, ctx) > 200 })

	if err := local.Stop(); err != nil {
		t.Fatal(err)
	}
	stoppedAt := time.Now()
	var seen actors.UnitStatus
	waitFor(t, ctx, "a unit retrying with the store's error in the tree", func() bool {
		tr, err := c.Tree(ctx)
		if err != nil {
			return false
		}
		for _, n := range tr.Nodes {
			for _, s := range n.Sources {
				for _, u := range s.Units {
					if u.State == actors.StateRetrying && u.LastError != "" && u.NextRetryAt != nil {
						seen = u
						return true
					}
				}
			}
		}
		return false
	})
	t.Logf("during the outage: %s is %s: %s (next retry %s)", seen.Unit, seen.State, seen.LastError, seen.NextRetryAt)
	if !strings.Contains(seen.LastError, "apply") && !strings.Contains(seen.LastError, "checkpoint") && !strings.Contains(seen.LastError, "lease") {
		t.Errorf("last_error %q does not say which store call failed", seen.LastError)
	}
	// let the outage last a few seconds under load, then bring it back
	waitFor(t, ctx, "a few seconds of outage", func() bool { return time.Since(stoppedAt) > 4*time.Second })
	if err := local.Start(); err != nil {
		t.Fatal(err)
	}
	t.Logf("store back after %s", time.Since(stoppedAt).Round(time.Millisecond))
	waitFor(t, ctx, "progress after the store came back", func() bool { return applied(c, ctx) > 0 })
	stopProducing()
	wg.Wait()
	if perr != nil {
		t.Fatal(perr)
	}
	v := drainAndVerify(t, ctx, c, prod.Produced())
	if !v.OK() || v.Produced < 400 {
		t.Fatalf("%s\n%s", v.Line(), strings.Join(v.Problems, "\n"))
	}
	// every unit runs again
	if _, err := c.WaitConverged(ctx); err != nil {
		t.Fatal(dumpLogs(c, err))
	}
}

// applied sums the applied counters of the cluster tree (0 when it cannot
// be read).
func applied(c *Cluster, ctx context.Context) int64 {
	tr, err := c.Tree(ctx)
	if err != nil {
		return 0
	}
	var n int64
	for _, node := range tr.Nodes {
		for _, s := range node.Sources {
			for _, u := range s.Units {
				n += u.Applied
			}
		}
	}
	return n
}
