package debug

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/actors/placement"
	"github.com/drover-dev/drover/internal/clock"
)

// fakeClock is a clock that moves only when Advance says; its timers fire
// from Advance, on the test's goroutine.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c       *fakeClock
	at      time.Time
	f       func()
	stopped bool
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 12, 1, 21, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.stopped
	t.stopped = true
	return was
}

// Advance moves the clock by d and runs the timers due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []func()
	keep := c.timers[:0]
	for _, t := range c.timers {
		switch {
		case t.stopped:
		case !t.at.After(c.now):
			t.stopped = true
			due = append(due, t.f)
		default:
			keep = append(keep, t)
		}
	}
	c.timers = keep
	c.mu.Unlock()
	for _, f := range due {
		f()
	}
}

// pending is how many timers wait.
func (c *fakeClock) pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if !t.stopped {
			n++
		}
	}
	return n
}

// clusterView is the cluster tree node a's endpoint serves now.
func clusterView(t *testing.T, s *Server) ClusterTree {
	t.Helper()
	r := get(t, "http://"+s.Addr()+"/debug/tree?scope=cluster")
	if r.code != 200 {
		t.Fatalf("cluster view: %d %s", r.code, r.body)
	}
	var ct ClusterTree
	if err := json.Unmarshal([]byte(r.body), &ct); err != nil {
		t.Fatalf("%v: %s", err, r.body)
	}
	return ct
}

func goneNames(ct ClusterTree) []string {
	var out []string
	for _, g := range ct.Gone {
		out = append(out, g.Node+":"+g.Gone.How)
	}
	return out
}

// Issue 13, item 9: a member that died stays in the cluster view, with its
// last tree, when and how it went and its last error, for GoneFor of the
// injected clock, then goes; one that left says so.
func TestClusterViewRemembersGoneMembersUntilTheyExpire(t *testing.T) {
	clk := newFakeClock()
	b := start(t, Config{Node: &fakeNode{trees: []actors.Tree{withUnits("node-b", "orders/1")}}})
	c, err := New(Config{Addr: "127.0.0.1:0", SampleEvery: -1, Node: &fakeNode{trees: []actors.Tree{withUnits("node-c", "orders/2", "orders/3")}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Shutdown(context.Background()) }) // a second Shutdown is a no-op
	cAddr := c.Addr()
	a := &fakeNode{trees: []actors.Tree{withUnits("node-a", "orders/0")}}
	members := []placement.Member{
		{Name: "node-a", DebugAddr: "127.0.0.1:1"},
		{Name: "node-b", DebugAddr: b.Addr(), State: placement.StateLeaving},
		{Name: "node-c", DebugAddr: cAddr},
	}
	a.setMembers(members...)
	s := start(t, Config{Node: a, Clock: clk, GoneFor: time.Minute})
	if ct := clusterView(t, s); len(ct.Nodes) != 3 || len(ct.Gone) != 0 {
		t.Fatalf("all live: %+v", ct)
	}
	killedAt := clk.Now().Add(2 * time.Second)
	clk.Advance(2 * time.Second)
	// node-c is killed: it stops answering before gossip drops it.
	if err := c.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if ct := clusterView(t, s); len(ct.Gone) != 0 {
		t.Fatalf("node-c unreachable but still a member: not gone yet: %v", goneNames(ct))
	}
	clk.Advance(3 * time.Second)
	a.setMembers(members[0], members[1]) // gossip declared node-c dead
	ct := clusterView(t, s)
	if got := goneNames(ct); len(got) != 1 || got[0] != "node-c:died" {
		t.Fatalf("gone %v, want node-c:died", got)
	}
	g := ct.Gone[0]
	if !g.Gone.Since.Equal(killedAt.Add(3*time.Second)) || g.Gone.TreeAt == nil || !g.Gone.TreeAt.Equal(killedAt.Add(-2*time.Second)) {
		t.Errorf("since %v (want %v), tree at %v (want %v)", g.Gone.Since, killedAt.Add(3*time.Second), g.Gone.TreeAt, killedAt.Add(-2*time.Second))
	}
	if !strings.Contains(g.Gone.LastError, cAddr) || g.Error != "" {
		t.Errorf("last error %q should name node-c's address %s (entry error %q)", g.Gone.LastError, cAddr, g.Error)
	}
	if len(g.Sources) != 1 || len(g.Sources[0].Units) != 2 || g.Sources[0].Units[1].Unit != "orders/3" {
		t.Errorf("node-c's last tree: %+v", g.Sources)
	}
	for _, n := range ct.Nodes {
		if n.Node == "node-c" {
			t.Errorf("node-c is gone: not among the live nodes")
		}
	}
	// node-b said "leaving" and then went: it left.
	clk.Advance(10 * time.Second)
	a.setMembers(members[0])
	if got := goneNames(clusterView(t, s)); strings.Join(got, ",") != "node-b:left,node-c:died" {
		t.Fatalf("gone %v, want node-b:left,node-c:died", got)
	}
	// node-c went 10 s before node-b: it expires first, at GoneFor.
	clk.Advance(time.Minute - 10*time.Second - time.Nanosecond)
	if got := goneNames(clusterView(t, s)); len(got) != 2 {
		t.Fatalf("just before node-c's expiry: gone %v", got)
	}
	clk.Advance(time.Nanosecond)
	if got := goneNames(clusterView(t, s)); strings.Join(got, ",") != "node-b:left" {
		t.Fatalf("at node-c's expiry: gone %v, want node-b:left", got)
	}
	// node-b comes back: live again, no longer gone.
	a.setMembers(members[0], members[1])
	if ct := clusterView(t, s); len(ct.Gone) != 0 || len(ct.Nodes) != 2 {
		t.Fatalf("node-b back: gone %v, %d nodes", goneNames(ct), len(ct.Nodes))
	}
}

func TestGoneMemoryIsBounded(t *testing.T) {
	clk := newFakeClock()
	g := newGoneMemory(time.Hour, 2)
	tree := func(names ...string) []NodeTree {
		var out []NodeTree
		for _, n := range names {
			out = append(out, NodeTree{Tree: withUnits(n, n+"/0")})
		}
		return out
	}
	g.observe(clk.Now(), "", tree("a", "b", "c", "d", "e"), nil)
	clk.Advance(time.Second)
	g.observe(clk.Now(), "", tree("a", "b", "c"), nil) // d and e go
	clk.Advance(time.Second)
	g.observe(clk.Now(), "", tree("a"), nil) // then b and c: d and e were gone longest
	var names []string
	for _, x := range g.list(clk.Now()) {
		names = append(names, x.Node)
	}
	if strings.Join(names, ",") != "b,c" {
		t.Fatalf("with MaxGone 2: gone %v, want the two that went last, b,c", names)
	}
	// Of several that go at once the bound keeps the last by name, the
	// same every time.
	g = newGoneMemory(time.Hour, 1)
	g.observe(clk.Now(), "", tree("x", "z", "y"), nil)
	g.observe(clk.Now(), "", nil, nil)
	if l := g.list(clk.Now()); len(l) != 1 || l[0].Node != "z" {
		t.Fatalf("gone %+v, want z", l)
	}
	if _, err := New(Config{Node: &fakeNode{trees: []actors.Tree{{Node: "n"}}}, MaxGone: -1}); err == nil || !strings.Contains(err.Error(), "MaxGone") {
		t.Errorf("negative MaxGone: %v", err)
	}
}

func TestGoneEntryHasTheTreeShapePlusGone(t *testing.T) {
	g := newGoneMemory(time.Hour, 4)
	now := time.Date(2026, 12, 1, 21, 0, 0, 0, time.UTC)
	g.observe(now, "", []NodeTree{{Tree: actors.Tree{Node: "a"}}, {Tree: actors.Tree{Node: "b"}, Error: "GET http://b/debug/tree: refused"}}, nil)
	g.observe(now.Add(time.Second), "", []NodeTree{{Tree: actors.Tree{Node: "a"}}}, nil)
	b, err := json.Marshal(ClusterTree{Nodes: []NodeTree{{Tree: normalize(actors.Tree{Node: "a"})}}, Gone: g.list(now.Add(time.Second))})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"nodes":[{"node":"a","members":[],"sources":[]}],"gone":[{"node":"b","members":[],"sources":[],` +
		`"gone":{"since":"2026-12-01T21:00:01Z","how":"died","last_error":"GET http://b/debug/tree: refused","tree_at":null}}]}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
}

// The node reading the view never goes from it: its own tree (every unit
// it holds) is not kept, the other members' are.
func TestGoneMemoryKeepsNoTreeOfItsOwnNode(t *testing.T) {
	g := newGoneMemory(time.Minute, 8)
	now := time.Unix(1000, 0)
	nodes := []NodeTree{
		{Tree: actors.Tree{Node: "a", Sources: []actors.SourceStatus{{Name: "orders", Units: []actors.UnitStatus{{Unit: "orders/0"}}}}}},
		{Tree: actors.Tree{Node: "b", Sources: []actors.SourceStatus{{Name: "orders", Units: []actors.UnitStatus{{Unit: "orders/1"}}}}}},
	}
	g.observe(now, "a", nodes, nil)
	g.mu.Lock()
	_, kept := g.live["a"]
	b := g.live["b"]
	g.mu.Unlock()
	if kept {
		t.Error("the memory keeps the reading node's own tree")
	}
	if b == nil || len(b.tree.Sources) != 1 {
		t.Fatalf("member b's tree not kept: %+v", b)
	}
	g.observe(now.Add(time.Second), "a", nodes[:1], nil)
	if l := g.list(now.Add(time.Second)); len(l) != 1 || l[0].Node != "b" {
		t.Errorf("gone: %+v, want b", l)
	}
}
