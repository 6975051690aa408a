package main

import (
	"context"
	"encoding/json"
	"net"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/actors/placement"
	"github.com/drover-dev/drover/cluster/debug"
)

// treeNode is a debug.Node with a fixed tree.
type treeNode struct {
	mu      sync.Mutex
	tree    actors.Tree
	members []placement.Member
}

func (n *treeNode) Tree() actors.Tree {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.tree
}

func (n *treeNode) Members() []placement.Member {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.members)
}

func (n *treeNode) Ready() error { return nil }

// treeCheckLeaks fails the test if it leaves goroutines behind; call it
// first so its cleanup runs after the servers' cleanups.
func treeCheckLeaks(t *testing.T) {
	t.Helper()
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opt) })
}

func treeServe(t *testing.T, token string, n *treeNode) *debug.Server {
	t.Helper()
	// No background samples: the tests set their nodes' trees after Start.
	s, err := debug.New(debug.Config{Addr: "127.0.0.1:0", Token: token, Node: n, MembersAuthenticated: true, SampleEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return s
}

func treeTime(t *testing.T, s string) *time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return &tm
}

// treeSample is node-1 of the example in `drover tree --help`.
func treeSample(t *testing.T) actors.Tree {
	return actors.Tree{
		Node: "node-1",
		Members: []actors.MemberStatus{
			{Name: "node-1", Addr: "127.0.0.1:7946", State: "alive"},
			{Name: "node-2", Addr: "127.0.0.1:7947", State: "alive"},
			{Name: "node-3", Addr: "127.0.0.1:7948", State: "leaving"},
		},
		Sources: []actors.SourceStatus{
			{Name: "orders", Type: "kafka", State: "running", Units: []actors.UnitStatus{
				{Unit: "orders/0", Node: "node-1", State: "running", LeaseToken: 7, LeaseExpiresAt: treeTime(t, "2026-01-02T12:00:09Z"),
					Position: "1234", Received: 1300, Applied: 1290, DeadLettered: 10, LastPullAt: treeTime(t, "2026-01-02T12:00:01Z")},
				{Unit: "orders/10", Node: "node-1", State: "retrying", LeaseToken: 2, Position: "88", Lag: 5, LagSeconds: 12.5, Received: 90, Applied: 88,
					Rejected: 2, Restarts: 1, LastError: "fetch: broker\nunreachable", NextRetryAt: treeTime(t, "2026-01-02T12:00:03Z")},
			}},
			{Name: "jobs", Type: "sqs", State: "starting", Error: "list slots: denied"},
		},
	}
}

func TestTreePrintsTheNodeAsAnIndentedTree(t *testing.T) {
	treeCheckLeaks(t)
	s := treeServe(t, "", &treeNode{tree: treeSample(t)})
	retry := treeTime(t, "2026-01-02T12:00:03Z").Local().Format("15:04:05")
	want := `node-1 (members: node-1 alive, node-2 alive, node-3 leaving)
├─ orders [kafka] running
│  ├─ orders/0   running   token 7  pos 1234  lag 0  recv 1300 applied 1290 dl 10 restarts 0
│  └─ orders/10  retrying  token 2  pos 88  lag 5 (12.5s)  recv 90 applied 88 dl 0 restarts 1 rejected 2  last error: fetch: broker unreachable, retry at ` + retry + `
└─ jobs [sqs] starting  error: list slots: denied
   └─ (no units on this node)
`
	for _, addr := range []string{s.Addr(), "http://" + s.Addr(), "http://" + s.Addr() + "/debug/", "http://" + s.Addr() + "/debug/tree?scope=cluster"} {
		code, out, errs := runCLI(t, "tree", "--addr", addr)
		if code != 0 || out != want {
			t.Errorf("tree --addr %s: exit %d, stderr %q\n got:\n%s\nwant:\n%s", addr, code, errs, out, want)
		}
	}
}

func TestTreeJSONIsTheEndpointsJSON(t *testing.T) {
	treeCheckLeaks(t)
	tree := treeSample(t)
	s := treeServe(t, "", &treeNode{tree: tree})
	code, out, errs := runCLI(t, "tree", "--addr", s.Addr(), "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var got actors.Tree
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v: %q", err, out)
	}
	if !reflect.DeepEqual(got, tree) {
		t.Fatalf("JSON round trip\n got %+v\nwant %+v", got, tree)
	}
	if !strings.Contains(out, `"lease_token":7`) || !strings.Contains(out, `"dead_lettered":10`) {
		t.Fatalf("not the Contract's field names: %s", out)
	}
}

func TestTreeClusterPrintsOneBlockPerNode(t *testing.T) {
	treeCheckLeaks(t)
	two := &treeNode{tree: actors.Tree{Node: "node-2", Members: []actors.MemberStatus{{Name: "node-2", State: "alive"}}}}
	s2 := treeServe(t, "tok", two)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	one := &treeNode{tree: treeSample(t), members: []placement.Member{
		{Name: "node-1", DebugAddr: "127.0.0.1:1"},
		{Name: "node-3", DebugAddr: dead},
		{Name: "node-2", DebugAddr: s2.Addr()},
	}}
	// node-2 also claims orders/0: the summary must say so.
	two.tree.Sources = []actors.SourceStatus{{Name: "orders", Type: "kafka", State: "running", Units: []actors.UnitStatus{
		{Unit: "orders/0", Node: "node-2", State: "acquiring", LeaseToken: 8}}}}
	s1 := treeServe(t, "tok", one)
	t.Setenv(treeTokenEnv, "tok")

	code, out, errs := runCLI(t, "tree", "--addr", s1.Addr(), "--cluster")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	blocks := strings.Split(out, "\n\n")
	if len(blocks) != 4 {
		t.Fatalf("want 3 node blocks and a summary, got %d:\n%s", len(blocks), out)
	}
	if !strings.HasPrefix(blocks[0], "node-1 (members: node-1 alive, node-2 alive, node-3 leaving)\n├─ orders [kafka] running\n") {
		t.Errorf("node-1 block:\n%s", blocks[0])
	}
	if want := "node-2 (members: node-2 alive)\n└─ orders [kafka] running\n   └─ orders/0  acquiring  token 8  pos -  lag 0  recv 0 applied 0 dl 0 restarts 0"; blocks[1] != want {
		t.Errorf("node-2 block:\n%s\nwant:\n%s", blocks[1], want)
	}
	if want := "node-3 (not answering)\n└─ error: Get \"http://" + dead + "/debug/tree\": dial tcp " + dead + ": connect: connection refused"; blocks[2] != want {
		t.Errorf("node-3 block:\n%s\nwant:\n%s", blocks[2], want)
	}
	if want := "cluster: 3 nodes (1 not answering), 3 units\non more than one node: orders/0 (node-1, node-2)\n"; blocks[3] != want {
		t.Errorf("summary:\n%s\nwant:\n%s", blocks[3], want)
	}

	code, out, errs = runCLI(t, "tree", "--addr", s1.Addr(), "--cluster", "--json")
	if code != 0 {
		t.Fatalf("--json exit %d: %s", code, errs)
	}
	var ct debug.ClusterTree
	if err := json.Unmarshal([]byte(out), &ct); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(ct.Nodes) != 3 || ct.Nodes[0].Node != "node-1" || ct.Nodes[1].Sources[0].Units[0].Node != "node-2" || ct.Nodes[2].Error == "" {
		t.Fatalf("cluster JSON: %s", out)
	}
	if !strings.Contains(out, `{"node":"node-3","members":[],"sources":[],"error":`) {
		t.Fatalf("the silent node's entry: %s", out)
	}
}

func TestTreeToken(t *testing.T) {
	treeCheckLeaks(t)
	s := treeServe(t, "s3cret", &treeNode{tree: actors.Tree{Node: "n"}})
	t.Setenv(treeTokenEnv, "")
	code, _, errs := runCLI(t, "tree", "--addr", s.Addr())
	if code != 1 || !strings.Contains(errs, "needs its token") || !strings.Contains(errs, treeTokenEnv) || !strings.Contains(errs, s.Addr()) {
		t.Fatalf("without token: exit %d, %q", code, errs)
	}
	code, _, errs = runCLI(t, "tree", "--addr", s.Addr(), "--token", "wrong")
	if code != 1 || !strings.Contains(errs, "refused the token") {
		t.Fatalf("wrong token: exit %d, %q", code, errs)
	}
	if code, out, errs := runCLI(t, "tree", "--addr", s.Addr(), "--token", "s3cret"); code != 0 || out != "n (members: none)\n└─ (no sources)\n" {
		t.Fatalf("--token: exit %d, %q %q", code, out, errs)
	}
	t.Setenv(treeTokenEnv, "s3cret")
	if code, _, errs := runCLI(t, "tree", "--addr", s.Addr()); code != 0 {
		t.Fatalf("token from %s: exit %d, %q", treeTokenEnv, code, errs)
	}
}

func TestTreeUnreachableExitsOneNamingTheAddress(t *testing.T) {
	treeCheckLeaks(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	code, out, errs := runCLI(t, "tree", "--addr", dead)
	if code != 1 || out != "" || !strings.Contains(errs, "cannot reach the debug endpoint at http://"+dead+"/debug/tree") || !strings.Contains(errs, "connection refused") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

func TestTreeBadFlagsExitTwo(t *testing.T) {
	for _, args := range [][]string{
		{"tree", "--bogus"},
		{"tree", "extra"},
		{"tree", "--addr", "ftp://127.0.0.1:7070"},
		{"tree", "--addr", ""},
		{"tree", "--addr", "http://"},
		{"tree", "--timeout", "0s"},
		{"tree", "--cluster=maybe"},
	} {
		if code, _, errs := runCLI(t, args...); code != 2 || errs == "" {
			t.Errorf("%v: exit %d, stderr %q; want 2 with a message", args, code, errs)
		}
	}
}

func TestTreeURL(t *testing.T) {
	for _, tt := range []struct {
		addr    string
		cluster bool
		want    string
	}{
		{"127.0.0.1:7070", false, "http://127.0.0.1:7070/debug/tree"},
		{"127.0.0.1:7070", true, "http://127.0.0.1:7070/debug/tree?scope=cluster"},
		{"http://10.0.0.5:7070/", false, "http://10.0.0.5:7070/debug/tree"},
		{"https://h.example/debug", true, "https://h.example/debug/tree?scope=cluster"},
		{"http://h:1/debug/tree?scope=cluster", false, "http://h:1/debug/tree"},
		{"http://proxy/drover/node-1/", false, "http://proxy/drover/node-1/debug/tree"},
		{"[::1]:7070", false, "http://[::1]:7070/debug/tree"},
	} {
		got, err := treeURL(tt.addr, tt.cluster)
		if err != nil || got != tt.want {
			t.Errorf("treeURL(%q, %v) = %q, %v; want %q", tt.addr, tt.cluster, got, err, tt.want)
		}
	}
}

// The text tree says that a node is drained and what its last reload did
// (the JSON's drained and reload), on the node's header.
func TestTreePrintsDrainedAndTheLastReload(t *testing.T) {
	at := treeTime(t, "2026-01-02T11:58:00Z")
	tr := actors.Tree{Node: "node-1", Members: []actors.MemberStatus{{Name: "node-1", State: "alive"}}, Drained: true,
		Reload: &actors.ReloadStatus{At: *at, Error: "remove source stuck: still stopping after 2m0s", Added: []string{"new"}, Stopping: []string{"stuck"}}}
	var b strings.Builder
	writeNodeTree(&b, debug.NodeTree{Tree: tr}, time.UTC)
	want := `node-1 (members: node-1 alive)  drained (out of placement until undrained)
   last reload 11:58:00: reload incomplete: added new; still stopping stuck; error: remove source stuck: still stopping after 2m0s
└─ (no sources)
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
	tr.Drained, tr.Reload = false, &actors.ReloadStatus{At: *at, OK: true, Removed: []string{"gone"}}
	b.Reset()
	writeNodeTree(&b, debug.NodeTree{Tree: tr}, time.UTC)
	if !strings.HasPrefix(b.String(), "node-1 (members: node-1 alive)\n   last reload 11:58:00: reloaded: removed gone\n") {
		t.Errorf("got:\n%s", b.String())
	}
}
