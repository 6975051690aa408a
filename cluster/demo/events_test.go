package demo

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Issue 13's acceptance: after a kill -9, `drover events --unit <u>
// --cluster` (the real command, against a survivor) names the dead
// holder, the new owner, the token change and the reason, in order.
func TestEventsAfterKillNameTheTakeover(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := startConverged(t, ctx, Config{Partitions: 6})
	defer c.Close()

	tree, err := c.Tree(ctx)
	if err != nil {
		t.Fatal(err)
	}
	unit, token := "", int64(0)
	for _, n := range tree.Nodes {
		if n.Node != "node-3" {
			continue
		}
		for _, s := range n.Sources {
			for _, u := range s.Units {
				if s.Name == "orders" && unit == "" && u.State == "running" {
					unit, token = u.Unit, u.LeaseToken
				}
			}
		}
	}
	if unit == "" || token == 0 {
		t.Fatalf("node-3 runs no orders unit with a lease: %+v", tree)
	}
	n3, _ := c.Node("node-3")
	if err := c.Kill(n3); err != nil {
		t.Fatal(err)
	}
	owner := ""
	waitFor(t, ctx, unit+" running elsewhere", func() bool {
		tr, err := c.Tree(ctx)
		if err != nil {
			return false
		}
		owner = tr.Running()[unit]
		return owner != "" && owner != "node-3"
	})
	n1, _ := c.Node("node-1")
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, binary, append([]string{"events", "--addr", n1.DebugAddr}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("drover events %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	out := run("--unit", unit, "--cluster")
	t.Logf("drover events --unit %s --cluster:\n%s", unit, out)

	// the takeover line, on the new owner: new token, dead holder, its
	// token, and why
	takeover := regexp.MustCompile(fmt.Sprintf(`(?m)^\S+ \S+\s+%s\s+%s\s+takeover\s+token (\d+) \(from node-3, token %d\)\s+node-3 \(token %d\) is not in this node's view and stopped renewing$`,
		regexp.QuoteMeta(owner), regexp.QuoteMeta(unit), token, token))
	m := takeover.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no takeover line naming node-3 (token %d) on %s in:\n%s", token, owner, out)
	}
	if m[1] != fmt.Sprint(token+1) {
		t.Errorf("new token %s, want %d", m[1], token+1)
	}
	// node-3's own events died with it; the survivors' come in time
	// order: the new owner was assigned the unit before it took the lease
	lines := strings.Split(strings.TrimSpace(out), "\n")
	assigned, took := -1, -1
	for i, l := range lines {
		switch {
		case strings.Contains(l, owner) && strings.Contains(l, " assigned "):
			assigned = i
		case takeover.MatchString(l):
			took = i
		}
	}
	if assigned < 0 || assigned > took {
		t.Errorf("want %s's assigned line before its takeover (lines %d, %d):\n%s", owner, assigned, took, out)
	}
	// --json carries the same as fields
	js := run("--unit", unit, "--cluster", "--json")
	for _, f := range []string{`"kind":"takeover"`, `"prev_owner":"node-3"`, fmt.Sprintf(`"prev_token":%d`, token), fmt.Sprintf(`"token":%d`, token+1), `"node":"` + owner + `"`} {
		if !strings.Contains(js, f) {
			t.Errorf("--json lacks %s:\n%s", f, js)
		}
	}
}
