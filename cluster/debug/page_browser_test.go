package debug

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
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
	if _, err := os.Stat(chromium); err != nil {
		msg := fmt.Sprintf("%s not found: scripts/setup installs it (apt-get install -y chromium)", chromium)
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true: " + msg)
		}
		t.Skip(msg)
	}
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

	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--no-first-run", "--disable-dev-shm-usage", "--user-data-dir="+t.TempDir(), "--virtual-time-budget=3000",
		"--dump-dom", "http://"+s.Addr()+"/debug/?token="+token)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	dom := stdout.String()
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
