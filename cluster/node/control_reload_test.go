package node

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/drover-dev/drover/cluster/debug"
	"github.com/drover-dev/drover/persistence"
)

// Reload on two real nodes, one after the other as an operator would: a
// source added, one removed and one changed. The added source runs, the
// removed one's units move to the node that still runs it and then stop
// everywhere, the changed one is reopened with its new settings, the
// unchanged one keeps its leases (same tokens); nothing is applied twice
// or lost. Then files that cannot be applied change nothing and say why.
func TestReloadAddRemoveChange(t *testing.T) {
	keep, gone := auditSource("keep", 2, ""), auditSource("gone", 2, "")
	chg, chg2 := auditSource("chg", 2, ""), auditSource("chg", 2, "batch_size: 7, discovery_interval: 20s")
	added := auditSource("added", 2, "")
	p := startPair(t, keep, gone, chg)
	n1, n2, url, streams := p.nodes[0], p.nodes[1], p.url, p.streams
	nodes := p.nodes[:]
	owned := func(source string) int { return len(unitsOf(n1, source)) + len(unitsOf(n2, source)) }
	eventually(t, "every unit owned", func() bool { return owned("keep") == 2 && owned("gone") == 2 && owned("chg") == 2 })
	for _, s := range []string{"keep", "gone", "chg"} {
		streams.produce(t, s, 2, 0, 100)
	}
	applied := func(source string, want int) {
		t.Helper()
		eventually(t, source+" applied", func() bool { r, _ := audited(t, url, source); return r >= want })
	}
	applied("keep", 100)
	applied("gone", 100)
	applied("chg", 100)
	tokens := func() map[string]int64 {
		out := map[string]int64{}
		for _, n := range nodes {
			for u, st := range unitsOf(n, "keep") {
				out[u] = st.LeaseToken
			}
		}
		return out
	}
	keepTokens := tokens()
	if len(keepTokens) != 2 {
		t.Fatalf("keep's units: %v", keepTokens)
	}

	writeFile(t, p.paths[0], p.yaml(0, keep, chg2, added))
	st, err := n1.Reload(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(st.Added, []string{"added"}) || !slices.Equal(st.Removed, []string{"gone"}) || !slices.Equal(st.Changed, []string{"chg"}) || !st.OK {
		t.Fatalf("reload: %+v", st)
	}
	if tr := n1.Tree(); tr.Reload == nil || !tr.Reload.OK || !slices.Equal(tr.Reload.Added, []string{"added"}) {
		t.Fatalf("n1's tree reload: %+v", tr.Reload)
	}
	if sourceNames(n1) != "added,chg,keep" {
		t.Fatalf("n1 runs %s", sourceNames(n1))
	}
	// the controls know the sources as reloaded: pause and seek take
	// "added" and refuse "gone" (they read the start's config before)
	for _, c := range []struct {
		source string
		ok     bool
	}{{"added", true}, {"gone", false}} {
		_, errT := n1.controlTarget(t.Context(), debug.ControlRequest{Action: debug.ActionPause, Source: c.source})
		_, errS := n1.seekUnit(t.Context(), debug.ControlRequest{Action: debug.ActionSeek, Unit: c.source + "/0"})
		if c.ok && (errT != nil || errS != nil) || !c.ok && (!errors.Is(errT, debug.ErrBadControl) || !errors.Is(errS, debug.ErrBadControl) || !strings.Contains(errS.Error(), "no source")) {
			t.Errorf("controls on %s after the reload: pause target %v, seek unit %v", c.source, errT, errS)
		}
	}
	// n2 alone runs "gone" now: it takes its units over
	eventually(t, "n2 runs all of gone", func() bool { return runningAll(n2, "gone", 2) })
	streams.produce(t, "gone", 2, 100, 50)
	applied("gone", 150)

	writeFile(t, p.paths[1], p.yaml(1, keep, chg2, added))
	if _, err := n2.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "gone stopped everywhere", func() bool { return owned("gone") == 0 })
	eventually(t, "added and chg owned", func() bool { return owned("added") == 2 && owned("chg") == 2 })
	if got := streams.opened("chg"); got != 4 {
		t.Errorf("chg opened %d times, want 4 (once per node at start, once per reload)", got)
	}
	for _, s := range []string{"keep", "chg", "added"} {
		first := 100
		if s == "added" {
			first = 0
		}
		streams.produce(t, s, 2, first, 100)
	}
	applied("keep", 200)
	applied("chg", 200)
	applied("added", 100)
	if got := tokens(); !maps.Equal(got, keepTokens) {
		t.Errorf("keep's leases changed hands: %v, were %v (an unchanged source must be untouched)", got, keepTokens)
	}
	for s, want := range map[string]int{"keep": 200, "chg": 200, "added": 100, "gone": 150} {
		if rows, distinct := audited(t, url, s); rows != want || distinct != want {
			t.Errorf("%s: %d audit rows, %d distinct; want %d each", s, rows, distinct, want)
		}
	}

	// Files that cannot be applied change nothing.
	good := p.yaml(0, keep, chg2, added)
	for _, c := range []struct{ name, yaml, want string }{
		{"unknown field", strings.Replace(good, "handler_name: audit", "handler_name: audit, bogus: 1", 1), "bogus"},
		{"not yaml", "sources: [", "invalid YAML"},
		{"fixed field", strings.Replace(good, "name: n1", "name: n9", 1), "node.name"},
		{"unregistered handler", p.yaml(0, keep, chg2, added, strings.Replace(auditSource("more", 1, ""), "audit", "nope", 1)), "no handler"},
	} {
		writeFile(t, p.paths[0], c.yaml)
		before := sourceNames(n1)
		_, err := n1.Reload(t.Context())
		if !errors.Is(err, ErrReloadInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: reload error %v, want ErrReloadInvalid naming %q", c.name, err, c.want)
		}
		if tr := n1.Tree(); tr.Reload == nil || tr.Reload.OK || !strings.Contains(tr.Reload.Error, c.want) {
			t.Errorf("%s: tree reload %+v", c.name, tr.Reload)
		}
		if got := sourceNames(n1); got != before {
			t.Errorf("%s: n1 runs %s, ran %s", c.name, got, before)
		}
		if _, err := n1.Control(t.Context(), debug.ControlRequest{Action: debug.ActionReload}); !errors.Is(err, debug.ErrBadControl) {
			t.Errorf("%s: reload control %v, want ErrBadControl (400)", c.name, err)
		}
	}
	if got := tokens(); !maps.Equal(got, keepTokens) {
		t.Errorf("keep's leases changed hands after refused reloads: %v, were %v", got, keepTokens)
	}
	// the file fixed again: a reload with nothing to change
	writeFile(t, p.paths[0], good)
	rep, err := n1.Control(t.Context(), debug.ControlRequest{Action: debug.ActionReload})
	if err != nil || rep.Detail != "reloaded: no source changed" {
		t.Fatalf("reload of the same file: %q, %v", rep.Detail, err)
	}
	// only the reload control (not Reload called directly, nor a refused
	// one) is in the audit table
	as, err := n1.store.ListAudit(t.Context(), persistence.AuditFilter{})
	if err != nil || len(as) != 1 || as[0].Action != "reload" || as[0].Args != "no source changed" {
		t.Errorf("audit entries %+v, %v", as, err)
	}
}

// sourceNames are the sources n's tree lists, sorted, joined by commas.
func sourceNames(n *Node) string {
	var names []string
	for _, s := range n.Tree().Sources {
		names = append(names, s.Name)
	}
	slices.Sort(names)
	return strings.Join(names, ",")
}
