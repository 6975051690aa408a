package demo

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/brokers/awstest"
	"github.com/drover-dev/drover/persistence/postgres/pgtest"
)

var (
	binary      string // the drover binary the node processes run
	pg          = pgtest.New()
	demoKinesis = awstest.Kinesis() // kinesalite, for the reshard test
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "drover-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "drover")
	out, err := exec.Command("go", "build", "-o", binary, "github.com/drover-dev/drover/cmd/drover").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build drover: %v\n%s", err, out)
		os.Exit(1)
	}
	code := awstest.Main(m, demoKinesis)
	if err := pg.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// Three node processes under load: kill -9 one (its units run elsewhere
// within 2 s on the fast profile), restart it (it takes back about a
// third), SIGTERM another (its units are handed over without waiting for
// lease expiry), and at the end nothing is lost or doubled. Every time the
// cluster converges the tree lists each unit exactly once, running; at
// every sampled moment in between no unit is held by two nodes.
func TestThreeNodesWithSQLite(t *testing.T) {
	threeNodes(t, "")
}

func TestThreeNodesWithPostgres(t *testing.T) {
	threeNodes(t, pg.URL(t))
}

func threeNodes(t *testing.T, storeURL string) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := startConverged(t, ctx, Config{StoreURL: storeURL, Partitions: 12})
	defer c.Close()
	s := c.NewSampler()
	stopSampling := sampling(ctx, s)
	s.Sample(ctx)
	s.Converged()

	_, stopProducing := producing(t, ctx, c, 7)

	// kill -9 node-3: its units run elsewhere within 2 s
	n3, _ := c.Node("node-3")
	s.Sample(ctx)
	s.Killed("node-3")
	if err := c.Kill(n3); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "node-3's units running elsewhere", func() bool { _, err := s.Failover(); return err == nil })
	fo, _ := s.Failover()
	t.Logf("failover after kill -9: %s", fo)
	if fo > 2*time.Second {
		t.Errorf("failover took %s, want <= 2 s (fast profile)", fo)
	}

	// restart it: it takes back about a third
	if err := c.StartNode(n3); err != nil {
		t.Fatal(err)
	}
	tree, err := c.WaitConverged(ctx)
	if err != nil {
		t.Fatal(dumpLogs(c, err))
	}
	waitFor(t, ctx, "node-3 takes back about a third", func() bool {
		tree, err = c.Tree(ctx)
		if err != nil || !c.Converged(tree) {
			return false
		}
		// each source has 12 units: a third is 4; placement's load bound
		// is 5 (ceil(12/3)+1)
		per := map[string]int{}
		for u, node := range tree.Running() {
			if node == "node-3" {
				per[strings.Split(u, "/")[0]]++
			}
		}
		return per["orders"] >= 3 && per["orders"] <= 5 && per["audit"] >= 3 && per["audit"] <= 5
	})

	// SIGTERM node-2: handed over at once, not after the 10 s lease
	n2, _ := c.Node("node-2")
	held := map[string]bool{}
	for u, node := range tree.Running() {
		if node == "node-2" {
			held[u] = true
		}
	}
	termAt := time.Now()
	if err := c.Term(n2, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := n2.ExitError(); err != nil {
		t.Errorf("node-2 did not exit cleanly after SIGTERM: %v", err)
	}
	waitFor(t, ctx, "node-2's units running elsewhere", func() bool {
		tr, err := c.Tree(ctx)
		if err != nil {
			return false
		}
		run := tr.Running()
		for u := range held {
			if run[u] == "" || run[u] == "node-2" {
				return false
			}
		}
		return true
	})
	handover := time.Since(termAt)
	t.Logf("graceful handover of %d units: %s", len(held), handover)
	if handover > 5*time.Second {
		t.Errorf("graceful handover took %s: the new owners waited (lease TTL is 10 s)", handover)
	}
	if !logContains(n2.LogPath, "units handed over") {
		t.Error("node-2's log does not say its units were handed over")
	}

	sent := stopProducing()
	v := drainAndVerify(t, ctx, c, sent)
	stopSampling()
	if !v.OK() || v.Produced == 0 || v.DeadLettered == 0 {
		t.Errorf("%s\n%s", v.Line(), strings.Join(v.Problems, "\n"))
	}
	if want := expectAvro(sent.Avro); len(sent.Avro) < AvroPartitions || len(want) == 0 {
		t.Errorf("Avro orders produced to %d partitions, %d keys expected: want all %d partitions, some keys", len(sent.Avro), len(want), AvroPartitions)
	}
	if bad := s.Violations(); len(bad) > 0 {
		t.Errorf("a unit was held by two nodes after convergence: %v", bad)
	}
	if s.Samples() < 20 {
		t.Errorf("only %d samples of the cluster tree", s.Samples())
	}
}

// Issue 9, item 6b: node-1 has an empty join list (node-2 and node-3 join
// it), as a new user sets a cluster up. Under load, node-1 is killed -9 and
// started again, with its empty join list, once the others declared it
// dead: it starts as a cluster of its own, and the others' healing must
// merge it back within 5 s. Then the cluster converges, no unit is held by
// two nodes from then on, and nothing is lost or doubled.
func TestFirstNodeRestartedWithEmptyJoinMergesBack(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c, err := startCluster(t, Config{Dir: t.TempDir(), Binary: binary, Partitions: 6, Log: testLog{t},
		Join: func(i int, gossip []string) []string {
			if i == 0 {
				return nil
			}
			return gossip[:1]
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	n1, _ := c.Node("node-1")
	if err := c.StartNode(n1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "node-1 up", func() bool { return len(members(ctx, n1)) == 1 })
	for _, n := range c.Nodes()[1:] {
		if err := c.StartNode(n); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.WaitConverged(ctx); err != nil {
		t.Fatal(dumpLogs(c, err))
	}
	s := c.NewSampler()
	stopSampling := sampling(ctx, s)

	prod, stopProducing := producing(t, ctx, c, 13)

	// kill -9 node-1 and wait until the others declared it dead: from then
	// on memberlist alone never contacts it again
	if err := c.Kill(n1); err != nil {
		t.Fatal(err)
	}
	others := c.Nodes()[1:]
	waitFor(t, ctx, "node-2 and node-3 drop node-1", func() bool {
		for _, n := range others {
			if !slices.Equal(members(ctx, n), []string{"node-2", "node-3"}) {
				return false
			}
		}
		return true
	})
	restartedAt := time.Now()
	if err := c.StartNode(n1); err != nil {
		t.Fatal(err)
	}
	all := []string{"node-1", "node-2", "node-3"}
	var seen map[string][]string
	for {
		seen = map[string][]string{}
		merged := true
		for _, n := range c.Nodes() {
			seen[n.Name] = members(ctx, n)
			merged = merged && slices.Equal(seen[n.Name], all)
		}
		if merged {
			break
		}
		if time.Since(restartedAt) > 5*time.Second {
			t.Fatal(dumpLogs(c, fmt.Errorf("not one cluster 5 s after node-1 restarted with an empty join list: members seen %v", seen)))
		}
		time.Sleep(20 * time.Millisecond) // polling a condition with a deadline
	}
	t.Logf("one cluster again %s after node-1 restarted", time.Since(restartedAt).Round(time.Millisecond))
	// the merge is the healer's join, or memberlist's own gossip to the
	// recently dead (GossipToTheDeadTime) reaching node-1 first, which
	// then refutes its death: both are a merge, only the first is logged
	if logContains(others[0].LogPath, "rejoined") || logContains(others[1].LogPath, "rejoined") {
		t.Log("merged by the healer's join")
	} else {
		t.Log("merged by memberlist's gossip to the recently dead before a heal join")
	}

	// once converged, no unit is held by two nodes any more
	if _, err := c.WaitConverged(ctx); err != nil {
		t.Fatal(dumpLogs(c, err))
	}
	s.Converged()
	t.Logf("converged %s after node-1 restarted", time.Since(restartedAt).Round(time.Millisecond))
	more := prod.Total() + 600
	waitFor(t, ctx, "more load after the merge", func() bool { return prod.Total() > more })

	sent := stopProducing()
	v := drainAndVerify(t, ctx, c, sent)
	stopSampling()
	if tree, err := c.Tree(ctx); err != nil || !c.Converged(tree) {
		t.Errorf("not converged at the end (%v)", err)
	}
	if !v.OK() || v.Produced == 0 {
		t.Errorf("%s\n%s", v.Line(), strings.Join(v.Problems, "\n"))
	}
	if bad := s.Violations(); len(bad) > 0 {
		t.Errorf("a unit was held by two nodes after the merge converged: %v", bad)
	}
}

// members are the member names a node's own tree lists (nil when the
// node does not answer).
func members(ctx context.Context, n *Node) []string {
	tctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	t, err := GetTree(tctx, n.DebugAddr, false)
	if err != nil || len(t.Nodes) != 1 {
		return nil
	}
	var out []string
	for _, m := range t.Nodes[0].Members {
		out = append(out, m.Name)
	}
	sort.Strings(out)
	return out
}

// startConverged starts a demo cluster of cfg (its Dir a fresh temporary
// folder unless set, the test binary, the test's log) with every node
// running, and waits until it has converged. The caller closes it.
func startConverged(t *testing.T, ctx context.Context, cfg Config) *Cluster {
	t.Helper()
	return startConvergedWith(t, ctx, cfg, nil)
}

// startConvergedWith is startConverged calling prepare, when set, on each
// node before it starts.
func startConvergedWith(t *testing.T, ctx context.Context, cfg Config, prepare func(*Cluster, *Node) error) *Cluster {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	cfg.Binary, cfg.Log = binary, testLog{t}
	c, err := startCluster(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes() {
		if prepare != nil {
			if err := prepare(c, n); err != nil {
				c.Close()
				t.Fatal(err)
			}
		}
		if err := c.StartNode(n); err != nil {
			c.Close()
			t.Fatal(err)
		}
	}
	if _, err := c.WaitConverged(ctx); err != nil {
		err = dumpLogs(c, err)
		c.Close()
		t.Fatal(err)
	}
	return c
}

// sampling runs s every 50 ms until the returned stop, which waits for it.
func sampling(ctx context.Context, s *Sampler) (stop func()) {
	sctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); s.Run(sctx, 50*time.Millisecond) }()
	return func() { cancel(); wg.Wait() }
}

// producing runs a producer from seed at 300 messages/s until the returned
// stop (call it once), which returns what it produced; it waits until some
// are produced.
func producing(t *testing.T, ctx context.Context, c *Cluster, seed uint64) (prod *Producer, stop func() Produced) {
	t.Helper()
	prod, err := c.NewProducer(seed)
	if err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithCancel(ctx)
	t.Cleanup(func() { cancel(); prod.Close() }) // also when the test fails first
	perr := make(chan error, 1)
	go func() { perr <- prod.Run(pctx, 300) }()
	waitFor(t, ctx, "some messages produced", func() bool { return prod.Total() > 300 })
	return prod, func() Produced {
		t.Helper()
		cancel()
		if err := <-perr; err != nil {
			t.Fatal(err)
		}
		return prod.Produced()
	}
}

// drainAndVerify waits until the cluster applied sent and returns the
// verifier's verdict, logged.
func drainAndVerify(t *testing.T, ctx context.Context, c *Cluster, sent Produced) Verdict {
	t.Helper()
	if err := c.WaitDrained(ctx, sent); err != nil {
		t.Fatal(dumpLogs(c, err))
	}
	v, err := c.Verify(ctx, sent)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(v.Line())
	return v
}

func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition with a deadline
	}
}

func logContains(path, s string) bool {
	b, err := os.ReadFile(path)
	return err == nil && strings.Contains(string(b), s)
}

// dumpLogs adds the tail of every node's log to err, for a failed test.
func dumpLogs(c *Cluster, err error) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%v", err)
	for _, n := range c.Nodes() {
		fmt.Fprintf(&b, "\n--- %s\n%s", n.Name, n.LogTail(15))
	}
	return fmt.Errorf("%s", b.String())
}

// startCluster is Start for a test: when the test fails, its log gets
// the tail of every node's log before t.TempDir (registered earlier, so
// removed later) takes the logs away.
func startCluster(t *testing.T, cfg Config) (*Cluster, error) {
	t.Helper()
	c, err := Start(cfg)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, n := range c.Nodes() {
			t.Logf("--- %s's log (last %d lines; the test failed)\n%s", n.Name, failedLogLines, n.LogTail(failedLogLines))
		}
	})
	return c, nil
}

const failedLogLines = 80

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
