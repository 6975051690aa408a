package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/cluster/config"
	"github.com/drover-dev/drover/cluster/node"
	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/persistence/stores"
)

// drover pause and resume against a real node on SQLite: the unit shows
// paused, the audit table says who and why, a bad target exits 2 naming
// it, a wrong token exits 1.
func TestPauseResumeCLI(t *testing.T) {
	dir := t.TempDir()
	yaml := fmt.Sprintf(`node: {name: n1, debug_addr: "127.0.0.1:0", admin_token: "${env:ADM}"}
cluster: {bind: "127.0.0.1:0", profile: fast}
store: {url: "sqlite:%s/d.db"}
sources:
  - {name: m, type: memory, memory: {partitions: 2}, records: {key: id}}
`, dir)
	cfg, err := config.Parse([]byte(yaml), config.Options{LookupEnv: func(k string) (string, bool) { return "adm", k == "ADM" }})
	if err != nil {
		t.Fatal(err)
	}
	n, err := node.Start(t.Context(), cfg, node.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	addr := n.DebugAddr()
	state := func(unit string) string {
		for _, s := range n.Tree().Sources {
			for _, u := range s.Units {
				if u.Unit == unit {
					return u.State
				}
			}
		}
		return ""
	}
	waitState := func(unit string, want func(string) bool, what string) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for !want(state(unit)) {
			if time.Now().After(deadline) {
				t.Fatalf("%s is %q, want %s", unit, state(unit), what)
			}
			time.Sleep(10 * time.Millisecond) // polling a condition with a deadline
		}
	}
	running := func(s string) bool { return s == actors.StateRunning }
	waitState("m/1", running, "running")

	code, out, errs := runCLI(t, "pause", "m/1", "--addr", addr, "--token", "adm", "--by", "bob", "--reason", "bad deploy")
	if code != 0 || !strings.Contains(out, "n1: paused m/1") {
		t.Fatalf("pause: exit %d, %q %q", code, out, errs)
	}
	waitState("m/1", func(s string) bool { return s == actors.StatePaused }, "paused")
	if s := state("m/0"); s == actors.StatePaused {
		t.Fatal("pausing m/1 paused m/0")
	}

	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"pause", "nope/1", "--token", "adm"}, 2, "in the config (sources: m)"},
		{[]string{"pause", "m/9", "--token", "adm"}, 2, "no unit m/9"},
		{[]string{"pause", "m", "--token", "wrong"}, 1, "refused the token"},
	} {
		code, out, errs := runCLI(t, append(c.args, "--addr", addr)...)
		if code != c.code || !strings.Contains(out+errs, c.says) {
			t.Errorf("%v: exit %d, %q %q; want %d saying %s", c.args, code, out, errs, c.code, c.says)
		}
	}

	code, out, errs = runCLI(t, "resume", "m/1", "--addr", addr, "--token", "adm", "--by", "bob")
	if code != 0 || !strings.Contains(out, "n1: resumed m/1") {
		t.Fatalf("resume: exit %d, %q %q", code, out, errs)
	}
	waitState("m/1", running, "running")

	st, err := stores.Open(context.Background(), "sqlite:"+dir+"/d.db", stores.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	as, err := st.ListAudit(context.Background(), persistence.AuditFilter{Source: "m"})
	if err != nil || len(as) != 2 || as[0].Action != "pause" || as[0].By != "bob" || as[0].Reason != "bad deploy" ||
		as[0].Unit != "m/1" || as[0].Node != "n1" || as[1].Action != "resume" {
		t.Fatalf("audit: %+v, %v", as, err)
	}
	// drover events --audit lists the same, in order, from any node
	code, out, errs = runCLI(t, "events", "--audit", "--addr", addr, "--unit", "m/1")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 2 || !strings.Contains(lines[0], "n1  pause  m/1  by bob  bad deploy") || !strings.Contains(lines[1], "n1  resume  m/1  by bob") {
		t.Fatalf("events --audit: exit %d, %q %q", code, out, errs)
	}
}
