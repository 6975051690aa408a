package testkit_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/actors/decode"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/testkit"
)

// expect is testkit.Expect over messages published per partition: the
// table it gives, and the reasons of the dead letters by "partition@position".
func expect(t *testing.T, dc decode.Config, byPart map[string][]brokers.Message) (docs, bad map[string]string) {
	t.Helper()
	parts := make([]string, 0, len(byPart))
	for p := range byPart {
		parts = append(parts, p)
	}
	sort.Strings(parts)
	var sent []testkit.Sent
	for _, p := range parts {
		for _, m := range byPart[p] {
			sent = append(sent, testkit.Sent{Partition: p, Msg: m})
		}
	}
	e, err := testkit.Expect(dc, sent)
	if err != nil {
		t.Fatal(err)
	}
	bad = make(map[string]string, len(e.Dead))
	for i, reason := range e.Dead {
		bad[sent[i].Partition+"@"+sent[i].Msg.Position] = reason
	}
	return e.Docs, bad
}

func newCluster(t *testing.T, cfg testkit.Config) *testkit.Cluster {
	t.Helper()
	c, err := testkit.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// mustStart starts c, failing t where it does not start.
func mustStart(t *testing.T, c *testkit.Cluster) {
	t.Helper()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
}

// mustSettle runs c until it settles, failing t with the report where it
// does not within d.
func mustSettle(t *testing.T, c *testkit.Cluster, d time.Duration) {
	t.Helper()
	if !c.Settle(d) {
		t.Fatalf("did not settle: %+v", c.Report())
	}
}

func checkReport(t *testing.T, c *testkit.Cluster) testkit.Report {
	t.Helper()
	r := c.Report()
	if r.Lost != 0 || r.Duplicated != 0 || len(r.Violations) != 0 {
		t.Fatalf("invariants broken: lost=%d duplicated=%d violations=%v", r.Lost, r.Duplicated, r.Violations)
	}
	return r
}

func records(t *testing.T, s persistence.Store, table string) map[string]string {
	t.Helper()
	out := map[string]string{}
	after := ""
	for {
		rs, err := s.Records(context.Background(), table, after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) == 0 {
			return out
		}
		for _, r := range rs {
			out[r.Key] = string(r.Doc)
		}
		after = rs[len(rs)-1].Key
	}
}

func deadLetters(t *testing.T, s persistence.Store, source string) []persistence.DeadLetter {
	t.Helper()
	dl, err := s.DeadLetters(context.Background(), persistence.DeadLetterFilter{Source: source})
	if err != nil {
		t.Fatal(err)
	}
	return dl
}

// publishKeyed spreads n workload messages over the stream's partitions by
// key, publishing at virtual time offsets, and remembers them per partition.
func publishKeyed(c *testkit.Cluster, wl *testkit.Workload, source string, parts, n, bursts int, over time.Duration, byPart map[string][]brokers.Message) {
	for b := 0; b < bursts; b++ {
		c.At(over*time.Duration(b)/time.Duration(bursts), func() {
			batch := map[string][]brokers.Message{}
			for i := 0; i < n/bursts; i++ {
				m, _ := wl.Next()
				p := testkit.PartitionOf(m, parts)
				batch[p] = append(batch[p], m)
			}
			ps := make([]string, 0, len(batch))
			for p := range batch {
				ps = append(ps, p)
			}
			sort.Strings(ps) // map order would make runs differ
			for _, p := range ps {
				ms := batch[p]
				pos := must(c.Publish(source, p, ms...))
				for i := range ms {
					ms[i].Position = pos[i]
				}
				byPart[p] = append(byPart[p], ms...)
			}
		})
	}
}

// Every good message applied exactly once, every bad one dead-lettered with
// its reason, order kept per unit: 3 nodes, a 12-partition stream and a
// 4-slot queue, 20,000 messages of every kind.
func TestTwentyThousandMixedMessages(t *testing.T) {
	c := newCluster(t, testkit.Config{Seed: 42, Nodes: 3})
	stream := actors.SourceSpec{Name: "orders", KeyField: "id", BatchSize: 200, MaxMessageBytes: 2048}
	must(c.AddStream(stream, 12))
	must(c.AddQueue(actors.SourceSpec{Name: "jobs", KeyField: "id", Slots: 4, BatchSize: 100, MaxMessageBytes: 2048}, 5*time.Second))
	mustStart(t, c)
	wl := testkit.NewWorkload(7)
	wl.MaxBytes = 2048
	byPart := map[string][]brokers.Message{}
	publishKeyed(c, wl, "orders", 12, 15000, 30, 10*time.Second, byPart)
	qwl := testkit.NewWorkload(8)
	qwl.MaxBytes, qwl.Tombstones, qwl.Keys = 2048, false, 1<<30 // distinct keys: queues have no order
	queued := qwl.Batch(5000)
	c.At(time.Second, func() { must(c.Publish("jobs", "", queued...)) })

	mustSettle(t, c, 5*time.Minute)
	r := checkReport(t, c)
	if r.Produced != 20000 {
		t.Fatalf("produced %d, want 20000", r.Produced)
	}

	dc := decode.Config{KeyField: "id", MaxBytes: 2048}
	wantDocs, wantBad := expect(t, dc, byPart)
	got := records(t, c.Store(), "orders")
	if len(got) != len(wantDocs) {
		t.Errorf("orders table has %d keys, want %d", len(got), len(wantDocs))
	}
	for k, d := range wantDocs {
		if got[k] != d {
			t.Errorf("key %s: got %s, want %s", k, got[k], d)
			break
		}
	}
	dls := deadLetters(t, c.Store(), "orders")
	if len(dls) != len(wantBad) || len(wantBad) == 0 {
		t.Errorf("orders: %d dead letters, want %d (> 0)", len(dls), len(wantBad))
	}
	for _, dl := range dls {
		part := strings.TrimPrefix(dl.Unit, "orders/")
		if reason, ok := wantBad[part+"@"+dl.Position]; !ok || dl.Reason != reason {
			t.Errorf("dead letter %s@%s reason %q, want %q", dl.Unit, dl.Position, dl.Reason, reason)
		}
	}
	qbad := 0
	for _, m := range queued {
		if dc.Record(m).Kind == persistence.OpDeadLetter {
			qbad++
		}
	}
	if n := len(deadLetters(t, c.Store(), "jobs")); n != qbad || qbad == 0 {
		t.Errorf("jobs: %d dead letters, want %d (> 0)", n, qbad)
	}
	if c.Queue("jobs").Acked() != 5000 {
		t.Errorf("jobs: %d acked, want 5000", c.Queue("jobs").Acked())
	}
	// quality windows (every 1,000 rows per source and node) were written,
	// saw the dead letters, and are shown in the tree
	ws, err := c.Store().QualityWindows(context.Background(), "orders", 0)
	if err != nil {
		t.Fatal(err)
	}
	var rows, failed int64
	for _, w := range ws {
		rows += w.RowsRead
		failed += w.RowsFailed
		if w.Node == "" || w.Status == "" || len(w.Fields) == 0 && w.RowsRead > w.RowsFailed {
			t.Errorf("quality window %+v", w)
		}
	}
	if len(ws) < 9 || rows < 9000 || rows > 15000 || failed == 0 {
		t.Errorf("orders: %d quality windows covering %d rows (%d failed), want about 15 windows of 1,000", len(ws), rows, failed)
	}
	if q := must(c.Tree("node-1")).Sources[0].Quality; q == nil || q.RowsRead == 0 {
		t.Errorf("the tree shows no quality window: %+v", q)
	}
	// the tree counts add up too
	var applied, dead int64
	for _, n := range c.Running() {
		tr := must(c.Tree(n))
		for _, s := range tr.Sources {
			for _, u := range s.Units {
				applied += u.Applied
				dead += u.DeadLettered
			}
		}
	}
	if applied+dead != 20000 {
		t.Errorf("tree: applied %d + dead-lettered %d != 20000", applied, dead)
	}
}

// Kill a node under load: its units are owned again within the detection
// delay plus one lease acquisition, nothing lost or doubled.
func TestKillUnderLoad(t *testing.T) {
	const detection = time.Second
	c := newCluster(t, testkit.Config{Seed: 3, Nodes: 3, Detection: detection, FailoverBound: 2 * time.Second})
	must(c.AddStream(actors.SourceSpec{Name: "orders", KeyField: "id", BatchSize: 50}, 8))
	must(c.AddQueue(actors.SourceSpec{Name: "jobs", KeyField: "id", Slots: 3, BatchSize: 20}, 3*time.Second))
	mustStart(t, c)
	byPart := map[string][]brokers.Message{}
	publishKeyed(c, testkit.NewWorkload(1), "orders", 8, 4000, 40, 8*time.Second, byPart)
	qw := testkit.NewWorkload(2)
	qw.Tombstones = false
	for i := 0; i < 10; i++ {
		c.At(time.Duration(i)*700*time.Millisecond, func() { must(c.Publish("jobs", "", qw.Batch(100)...)) })
	}
	c.Run(3 * time.Second)
	victim := "node-2"
	if err := c.Kill(victim); err != nil {
		t.Fatal(err)
	}
	c.Run(4 * time.Second)
	mustSettle(t, c, 2*time.Minute)
	r := checkReport(t, c)
	if len(r.Failovers) == 0 {
		t.Fatal("the killed node held no lease: the test did not test failover")
	}
	for _, f := range r.Failovers {
		if f.To == victim || f.Took > detection+time.Second {
			t.Errorf("failover of %s to %s took %s (bound %s)", f.Unit, f.To, f.Took, detection+time.Second)
		}
	}
	for u, owners := range c.Owners() {
		if len(owners) != 1 || owners[0] == victim {
			t.Errorf("unit %s owned by %v after failover", u, owners)
		}
	}
}

// Graceful stop: units hand over with no wait for lease expiry and no
// duplicates.
func TestGracefulStopHandsOver(t *testing.T) {
	c := newCluster(t, testkit.Config{Seed: 5, Nodes: 3})
	must(c.AddStream(actors.SourceSpec{Name: "orders", KeyField: "id", BatchSize: 50, LeaseTTL: 30 * time.Second}, 9))
	mustStart(t, c)
	publishKeyed(c, testkit.NewWorkload(9), "orders", 9, 3000, 30, 6*time.Second, map[string][]brokers.Message{})
	c.Run(2 * time.Second)
	held := map[string]bool{}
	tr := must(c.Tree("node-3"))
	for _, u := range tr.Sources[0].Units {
		held[u.Unit] = true
	}
	if len(held) == 0 {
		t.Fatal("node-3 owns nothing")
	}
	stopAt := c.Now()
	if err := c.Stop("node-3"); err != nil {
		t.Fatal(err)
	}
	if !c.RunUntil(func() bool { return c.Stopped("node-3") }, 5*time.Second) {
		t.Fatal("node-3 did not finish its graceful stop within 5 s")
	}
	// every unit it held is acquired by another node within a second of
	// the stop, long before the 30 s lease could expire
	handedOver := func() bool {
		left := map[string]bool{}
		for u := range held {
			left[u] = true
		}
		for _, e := range c.Log("acquired") {
			if left[e.Unit] && e.Node != "node-3" && e.Time.After(stopAt) {
				delete(left, e.Unit)
			}
		}
		return len(left) == 0
	}
	if !c.RunUntil(handedOver, time.Second) {
		t.Fatalf("units of node-3 not all taken over within 1 s of the stop: %v", c.Log("acquired"))
	}
	if len(c.Log("released")) == 0 {
		t.Error("no lease was released")
	}
	mustSettle(t, c, time.Minute)
	checkReport(t, c)
}

// Pause a node past its lease and resume it: its late apply is refused by
// fencing, nothing is applied twice.
func TestPausedNodeIsFenced(t *testing.T) {
	c := newCluster(t, testkit.Config{Seed: 11, Nodes: 3, MinLatency: 2 * time.Millisecond, MaxLatency: 20 * time.Millisecond})
	must(c.AddStream(actors.SourceSpec{Name: "orders", KeyField: "id", BatchSize: 20, LeaseTTL: 3 * time.Second}, 6))
	mustStart(t, c)
	publishKeyed(c, testkit.NewWorkload(4), "orders", 6, 6000, 60, 12*time.Second, map[string][]brokers.Message{})
	c.Run(2 * time.Second)
	victim := "node-1"
	// pause while it is in the middle of applying
	if !c.RunUntil(func() bool { return c.Busy(victim, "apply") }, 5*time.Second) {
		t.Fatal("node-1 never had an apply in flight")
	}
	if err := c.Pause(victim); err != nil {
		t.Fatal(err)
	}
	c.Run(8 * time.Second) // past detection and past the 3 s lease
	taken := 0
	for _, e := range c.Log("acquired") {
		if e.Node != victim {
			taken++
		}
	}
	if err := c.Resume(victim); err != nil {
		t.Fatal(err)
	}
	c.Run(3 * time.Second)
	lost := c.Log("lease-lost")
	fenced := 0
	for _, e := range lost {
		if e.Node == victim {
			fenced++
		}
	}
	if fenced == 0 {
		t.Fatalf("the resumed node never learned it lost its leases (events: %v)", lost)
	}
	mustSettle(t, c, time.Minute)
	checkReport(t, c)
}

// A broker failing 5 times in a row: the unit goes retrying, is restarted
// after backoff, restarts and last_error show in the tree, other units keep
// going.
func TestBrokerFailuresRestartUnit(t *testing.T) {
	c := newCluster(t, testkit.Config{Seed: 13, Nodes: 1})
	flaky := must(c.AddStream(actors.SourceSpec{Name: "flaky", KeyField: "id", MaxConsecutiveFailures: 5}, 1))
	must(c.AddStream(actors.SourceSpec{Name: "steady", KeyField: "id"}, 2))
	mustStart(t, c)
	c.Run(500 * time.Millisecond)
	flaky.FailNext("fetch", 5, nil)
	wl := testkit.NewWorkload(1)
	for i := 0; i < 20; i++ {
		c.At(time.Duration(i)*200*time.Millisecond, func() {
			m := wl.Batch(10)
			must(c.Publish("steady", testkit.PartitionOf(m[0], 2), m...))
			must(c.Publish("flaky", "0", wl.Batch(5)...))
		})
	}
	var sawRetrying bool
	unit := func() actors.UnitStatus {
		tr := must(c.Tree("node-1"))
		for _, s := range tr.Sources {
			for _, u := range s.Units {
				if u.Unit == "flaky/0" {
					return u
				}
			}
		}
		return actors.UnitStatus{}
	}
	steadyDuringOutage := false
	if !c.RunUntil(func() bool {
		u := unit()
		if u.State == actors.StateRetrying {
			sawRetrying = true
			if u.NextRetryAt == nil || u.LastError == "" {
				t.Fatalf("retrying unit without next_retry_at or last_error: %+v", u)
			}
			tr := must(c.Tree("node-1"))
			for _, s := range tr.Sources {
				if s.Name == "steady" {
					for _, su := range s.Units {
						if su.Applied > 0 {
							steadyDuringOutage = true
						}
					}
				}
			}
		}
		return u.Restarts >= 1 && u.State == actors.StateRunning && u.Applied > 0
	}, 30*time.Second) {
		t.Fatalf("flaky/0 did not recover after a restart: %+v", unit())
	}
	u := unit()
	if !sawRetrying || !strings.Contains(u.LastError, "injected") {
		t.Errorf("tree did not show the failure: retrying seen %v, last_error %q", sawRetrying, u.LastError)
	}
	if !steadyDuringOutage {
		t.Error("the steady source made no progress while flaky/0 was failing")
	}
	if len(c.Log("restarted")) == 0 {
		t.Error("no restart in the log")
	}
	mustSettle(t, c, time.Minute)
	checkReport(t, c)
}

// The store failing for a while: units retry, nothing is lost, all is
// applied once it is back.
func TestStoreOutage(t *testing.T) {
	c := newCluster(t, testkit.Config{Seed: 17, Nodes: 2})
	must(c.AddStream(actors.SourceSpec{Name: "orders", KeyField: "id", BatchSize: 30}, 4))
	must(c.AddQueue(actors.SourceSpec{Name: "jobs", KeyField: "id", Slots: 2}, 3*time.Second))
	mustStart(t, c)
	publishKeyed(c, testkit.NewWorkload(5), "orders", 4, 2000, 20, 10*time.Second, map[string][]brokers.Message{})
	qw := testkit.NewWorkload(6)
	qw.Tombstones = false
	for i := 0; i < 10; i++ {
		c.At(time.Duration(i)*time.Second, func() { must(c.Publish("jobs", "", qw.Batch(50)...)) })
	}
	c.Run(2 * time.Second)
	c.StoreFaults().SetDown(true)
	retrying := false
	c.RunUntil(func() bool {
		for _, n := range c.Running() {
			for _, s := range must(c.Tree(n)).Sources {
				for _, u := range s.Units {
					if u.State == actors.StateRetrying && strings.Contains(u.LastError, "unreachable") {
						retrying = true
					}
				}
			}
		}
		return retrying
	}, 5*time.Second)
	if !retrying {
		t.Fatal("no unit showed retrying with the store error while the store was down")
	}
	c.Run(5 * time.Second)
	c.StoreFaults().SetDown(false)
	if !c.RunUntil(c.Settled, 3*time.Minute) {
		t.Fatalf("did not recover after the store came back: %+v", c.Report())
	}
	checkReport(t, c)
}

// A reshard: child shards start only after their parents are read to the
// end.
func TestReshardParentsFirst(t *testing.T) {
	c := newCluster(t, testkit.Config{Seed: 19, Nodes: 2})
	st := must(c.AddStream(actors.SourceSpec{Name: "events", KeyField: "id", BatchSize: 25, Discovery: 2 * time.Second}, 2))
	mustStart(t, c)
	wl := testkit.NewWorkload(3)
	for i := 0; i < 10; i++ {
		must(c.Publish("events", fmt.Sprint(i%2), wl.Batch(40)...))
	}
	c.Run(50 * time.Millisecond) // parents are mid-way
	kids := must(st.Split("0"))
	merged := must(st.Merge(kids[0], "1"))
	for i := 0; i < 10; i++ {
		must(c.Publish("events", kids[1], wl.Batch(30)...))
		must(c.Publish("events", merged, wl.Batch(30)...))
	}
	mustSettle(t, c, time.Minute)
	checkReport(t, c)
	finished := map[string]time.Time{}
	for _, e := range c.Log("finished") {
		finished[e.Unit] = e.Time
	}
	parents := map[string][]string{
		"events/" + kids[0]: {"events/0"},
		"events/" + kids[1]: {"events/0"},
		"events/" + merged:  {"events/" + kids[0], "events/1"},
	}
	for child, ps := range parents {
		var first time.Time
		for _, e := range c.Log("acquired") {
			if e.Unit == child {
				first = e.Time
				break
			}
		}
		for _, p := range ps {
			f, ok := finished[p]
			if !ok {
				t.Errorf("parent %s never finished", p)
				continue
			}
			if first.IsZero() || first.Before(f) {
				t.Errorf("%s acquired at %s, before its parent %s finished at %s", child, first, p, f)
			}
		}
	}
}

// The same seed gives the same run, event for event; another seed does not.
func TestSameSeedSameRun(t *testing.T) {
	run := func(seed uint64) (string, uint64) {
		c := newCluster(t, testkit.Config{Seed: seed, Nodes: 3})
		must(c.AddStream(actors.SourceSpec{Name: "orders", KeyField: "id", BatchSize: 10}, 6))
		must(c.AddQueue(actors.SourceSpec{Name: "jobs", KeyField: "id", Slots: 2, BatchSize: 10}, 2*time.Second))
		mustStart(t, c)
		publishKeyed(c, testkit.NewWorkload(seed), "orders", 6, 6000, 60, 6*time.Second, map[string][]brokers.Message{})
		qw := testkit.NewWorkload(seed + 1)
		qw.Tombstones = false
		c.At(time.Second, func() { must(c.Publish("jobs", "", qw.Batch(500)...)) })
		c.At(2*time.Second, func() { _ = c.Kill("node-2") })
		c.At(3*time.Second, func() { _ = c.Pause("node-3") })
		c.At(5*time.Second, func() { _ = c.Resume("node-3") })
		c.At(6*time.Second, func() { _ = c.Restart("node-2") })
		c.At(7*time.Second, func() { c.StoreFaults().FailNext("apply", 3) })
		mustSettle(t, c, 2*time.Minute)
		checkReport(t, c)
		return c.Digest(), c.Steps()
	}
	d1, n1 := run(99)
	d2, n2 := run(99)
	if d1 != d2 || n1 != n2 {
		t.Fatalf("same seed, different runs: %s (%d steps) vs %s (%d steps)", d1, n1, d2, n2)
	}
	if n1 < 3000 {
		t.Fatalf("only %d steps: not a busy scenario", n1)
	}
	if d3, _ := run(100); d3 == d1 {
		t.Fatalf("seeds 99 and 100 gave the same digest %s", d1)
	}
}
