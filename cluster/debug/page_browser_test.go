package debug

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/actors/placement"
)

const chromium = "/usr/bin/chromium"

// TestPageInHeadlessChromium loads the page in a real browser, lets it poll
// a scripted cluster for three seconds of virtual time and checks what it
// drew: a unit that moved from node-a to node-b between two polls is on
// node-b and marked as moved, and a member that does not answer is shown
// unreachable with its error.
func TestPageInHeadlessChromium(t *testing.T) {
	needChromium(t)
	const token = "page-token"
	b := start(t, Config{Token: token, Node: &fakeNode{trees: []actors.Tree{
		withUnits("node-b"),                         // first poll: node-b has no units yet
		withUnits("node-b", "orders/7", "orders/8"), // then orders/7 moved here
	}}})
	dead := deadAddr(t)
	a := &fakeNode{trees: []actors.Tree{
		withUnits("node-a", "orders/7", "orders/9"),
		withUnits("node-a", "orders/9"),
	}}
	a.setMembers(
		placement.Member{Name: "node-a", DebugAddr: "127.0.0.1:1"},
		placement.Member{Name: "node-b", DebugAddr: b.Addr()},
		placement.Member{Name: "node-c", DebugAddr: dead},
	)
	s := start(t, Config{Token: token, Node: a, MembersAuthenticated: true})

	dom := runChromium(t, "http://"+s.Addr()+"/debug/?token="+token, "--dump-dom")
	nodeB := column(t, dom, "node-b")
	for _, want := range []string{`data-unit="orders/7"`, `data-unit="orders/8"`, "moved from node-a", `class="card s-running moved`} {
		if !strings.Contains(nodeB, want) {
			t.Errorf("node-b's column lacks %q:\n%s", want, nodeB)
		}
	}
	nodeA := column(t, dom, "node-a")
	if strings.Contains(nodeA, "orders/7") || !strings.Contains(nodeA, `data-unit="orders/9"`) {
		t.Errorf("node-a's column should hold orders/9 only:\n%s", nodeA)
	}
	nodeC := column(t, dom, "node-c")
	if !strings.Contains(nodeC, `class="node down"`) || !strings.Contains(nodeC, "unreachable") || !strings.Contains(nodeC, dead) {
		t.Errorf("node-c should be grey, unreachable, with its error:\n%s", nodeC)
	}
	if !strings.Contains(dom, `class="status ok" id="status">last poll `) {
		t.Errorf("the status line does not show a good poll:\n%s", dom)
	}
}

// needChromium skips the test without Chromium, or fails it under CI.
func needChromium(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(chromium); err != nil {
		msg := fmt.Sprintf("%s not found: scripts/setup installs it (apt-get install -y chromium)", chromium)
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true: " + msg)
		}
		t.Skip(msg)
	}
}

// runChromium opens url in headless Chromium for three seconds of virtual
// time, in UTC, with the extra flags (--dump-dom, --screenshot=…), and
// returns what it printed.
func runChromium(t *testing.T, url string, flags ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	args := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--no-first-run", "--disable-dev-shm-usage", "--user-data-dir=" + t.TempDir(), "--virtual-time-budget=3000",
		"--hide-scrollbars"}, flags...)
	cmd := exec.CommandContext(ctx, chromium, append(args, url)...)
	cmd.Env = append(os.Environ(), "TZ=UTC")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	return stdout.String()
}

func withUnits(node string, units ...string) actors.Tree {
	t := sampleTree(node, units...)
	for i := range t.Sources[0].Units {
		t.Sources[0].Units[i].State, t.Sources[0].Units[i].LastError, t.Sources[0].Units[i].NextRetryAt = actors.StateRunning, "", nil
	}
	return t
}

// column is the HTML of one node's column in a dumped DOM.
func column(t *testing.T, dom, node string) string {
	t.Helper()
	i := strings.Index(dom, `data-node="`+node+`"`)
	if i < 0 {
		t.Fatalf("no column for %s in the page:\n%s", node, dom)
	}
	i = strings.LastIndex(dom[:i], "<section")
	j := strings.Index(dom[i:], "</section>")
	return dom[i : i+j]
}

// setTree makes every later call of Tree answer tree.
func (f *fakeNode) setTree(tree actors.Tree) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.trees, f.calls = []actors.Tree{tree}, 0
}

// appliedTree is node's running units of source orders, each with applied
// and a lag_seconds the broker cannot tell (-1).
func appliedTree(node string, applied int64, units ...string) actors.Tree {
	t := withUnits(node, units...)
	for i := range t.Sources[0].Units {
		t.Sources[0].Units[i].Applied = applied
		t.Sources[0].Units[i].LagSeconds = -1
	}
	return t
}

// Issue 13, item 9: a page opened after a node died still shows it, grey,
// "dead since", with its last error and where each of its units went (a
// live owner, or not yet owned), and per source the applied/s and lag
// charts of the last ten minutes with the move marked. The cluster is
// sampled every 30 s of a fake clock for ten minutes before the page
// opens; node-c is killed at the 12th sample and leaves the view at the
// 13th, when its orders/7 is on node-b and its orders/8 on no one. The
// screenshot goes to $DROVER_PAGE_SCREENSHOT when set (the lead looks at
// it), else to a temporary directory.
func TestPageShowsGoneNodesAndChartsInHeadlessChromium(t *testing.T) {
	needChromium(t)
	const token = "page-token"
	clk := newFakeClock()
	bNode := &fakeNode{trees: []actors.Tree{appliedTree("node-b", 0, "orders/1")}}
	b := start(t, Config{Token: token, Node: bNode})
	cNode := &fakeNode{trees: []actors.Tree{appliedTree("node-c", 0, "orders/7", "orders/8")}}
	c, err := New(Config{Addr: "127.0.0.1:0", Token: token, SampleEvery: -1, Node: cNode})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Shutdown(context.Background()) })
	aNode := &fakeNode{trees: []actors.Tree{appliedTree("node-a", 0, "orders/0")}}
	members := []placement.Member{
		{Name: "node-a", DebugAddr: "127.0.0.1:1"},
		{Name: "node-b", DebugAddr: b.Addr()},
		{Name: "node-c", DebugAddr: c.Addr()},
	}
	aNode.setMembers(members...)
	s := start(t, Config{Token: token, Node: aNode, MembersAuthenticated: true, Clock: clk, SampleEvery: 30 * time.Second})
	deadSince := clk.Now().Add(13 * 30 * time.Second).Format("15:04:05")
	// The sample at Start is the first; each later one is taken when the
	// clock passes SampleEvery, after the cluster changed.
	for i := range 21 {
		n := int64(i)
		ta := appliedTree("node-a", 900*n, "orders/0")
		if i >= 18 { // the last three samples know node-a's lag: the chart's line
			ta.Sources[0].Units[0].LagSeconds = float64(2 * i)
		}
		aNode.setTree(ta)
		switch {
		case i < 12:
			bNode.setTree(appliedTree("node-b", 600*n, "orders/1"))
			cNode.setTree(appliedTree("node-c", 1500*n, "orders/7", "orders/8"))
		case i == 12:
			if err := c.Shutdown(t.Context()); err != nil { // kill -9: node-c stops answering
				t.Fatal(err)
			}
		default:
			aNode.setMembers(members[0], members[1]) // gossip declared node-c dead
			bNode.setTree(appliedTree("node-b", 600*n, "orders/1"))
			if i >= 13 { // orders/7 has a new owner, counting from 0
				tr := appliedTree("node-b", 600*n, "orders/1", "orders/7")
				tr.Sources[0].Units[1].Applied = 1500 * (n - 12)
				bNode.setTree(tr)
			}
		}
		if i > 0 {
			clk.Advance(30 * time.Second) // the background sampler's timer fires: one sample
		}
		if !waitFor(10*time.Second, func() bool {
			s.hist.mu.Lock()
			defer s.hist.mu.Unlock()
			return s.hist.last.Equal(clk.Now()) && clk.pending() == 1
		}) {
			t.Fatalf("sample %d not taken", i+1)
		}
	}

	dom := runChromium(t, "http://"+s.Addr()+"/debug/?token="+token, "--dump-dom")
	nodeC := column(t, dom, "node-c")
	for _, want := range []string{`class="node gone"`, `data-gone="dead"`, "dead since " + deadSince, "last error: ", c.Addr(),
		`data-unit="orders/7"><span class="uid">orders/7</span><span class="to">→ node-b</span>`,
		`data-unit="orders/8"><span class="uid">orders/8</span><span class="unowned">→ not yet owned</span>`} {
		if !strings.Contains(nodeC, want) {
			t.Errorf("node-c's column lacks %q:\n%s", want, nodeC)
		}
	}
	if nodeB := column(t, dom, "node-b"); !strings.Contains(nodeB, "was on node-c") {
		t.Errorf("node-b's orders/7 should say where it was:\n%s", nodeB)
	}
	charts := dom[strings.Index(dom, `<section id="charts">`):strings.Index(dom, `<main id="board">`)]
	for _, want := range []string{`data-source="orders"`, "last 10 min · 1 move", `data-series="applied_per_sec"`, `<polyline class="rate" points="`,
		`<line class="mv"`, "orders/7: node-c → node-b", `data-series="lag_seconds"`, `<polyline class="lagline" points="`, "lag<b>40 s</b>"} {
		if !strings.Contains(charts, want) {
			t.Errorf("charts lack %q:\n%s", want, charts)
		}
	}
	// The last rate: 900 + 600 + 1500 applied per 30 s = 100/s.
	if !strings.Contains(charts, `<div class="clabel">applied/s<b>100</b><span class="cmax">max `) {
		t.Errorf("the latest applied/s should read 100:\n%s", charts)
	}

	shot := os.Getenv("DROVER_PAGE_SCREENSHOT")
	if shot == "" {
		shot = filepath.Join(t.TempDir(), "page.png")
	}
	runChromium(t, "http://"+s.Addr()+"/debug/?token="+token, "--screenshot="+shot, "--window-size=1500,820")
	if b, err := os.ReadFile(shot); err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Fatalf("screenshot %s: %v (%d bytes)", shot, err, len(b))
	}
	t.Logf("screenshot: %s", shot)
}
