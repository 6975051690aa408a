package debug

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/actors"
)

// viewOf is ct as the JSON path reads it (a sampleView), for the tests
// that compare the tree path (addTree) with the JSON path. A lag_seconds
// below 0 is unknown, as in the JSON.
func viewOf(ct ClusterTree) sampleView {
	v := sampleView{Nodes: make([]sampleNode, len(ct.Nodes))}
	for i, n := range ct.Nodes {
		sn := sampleNode{Node: n.Node, Error: n.Error, Sources: make([]sampleSource, len(n.Sources))}
		for j, src := range n.Sources {
			ss := sampleSource{Name: src.Name, Units: make([]sampleUnit, len(src.Units))}
			for k, u := range src.Units {
				ss.Units[k] = sampleUnit{Unit: u.Unit, Applied: u.Applied}
				if u.LagSeconds >= 0 {
					lag := u.LagSeconds
					ss.Units[k].LagSeconds = &lag
				}
			}
			sn.Sources[j] = ss
		}
		v.Nodes[i] = sn
	}
	return v
}

// idleTree is one node's tree of perSource units in each of sources
// sources, as an idle node shows them: counters that do not move.
func idleTree(node string, sources, perSource int) ClusterTree {
	t := actors.Tree{Node: node}
	for s := range sources {
		src := actors.SourceStatus{Name: fmt.Sprintf("source-%d", s)}
		for u := range perSource {
			src.Units = append(src.Units, actors.UnitStatus{Unit: fmt.Sprintf("source-%d/%d", s, u), Node: node, Applied: int64(u), LagSeconds: 0})
		}
		t.Sources = append(t.Sources, src)
	}
	return ClusterTree{Nodes: []NodeTree{{Tree: t}}}
}

// warm adds samples of ct until every slot of the ring was used once: the
// steady state of a node whose units stay where they are.
func warm(h *history, ct ClusterTree, now time.Time) time.Time {
	for range len(h.ring) + 1 {
		now = now.Add(h.every)
		h.addTree(now, ct, -1, nil)
	}
	return now
}

// BenchmarkHistoryAdd is the background sample of the `drover bench
// --idle 10000` node: 10,000 units over 10 sources on one node.
func BenchmarkHistoryAdd(b *testing.B) {
	ct := idleTree("n1", 10, 1000)
	h := newHistory(DefaultSampleEvery)
	now := warm(h, ct, newFakeClock().Now())
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(DefaultSampleEvery)
		h.addTree(now, ct, -1, nil)
	}
}

// In steady state (the same units on the same nodes) a sample allocates
// per source (its point's two numbers), never per unit: 10,000 units made
// 20,000 allocations (4.3 MB) per sample before the buffers were kept.
func TestHistoryAddAllocatesNothingPerUnit(t *testing.T) {
	const sources, perSource = 10, 1000
	ct := idleTree("n1", sources, perSource)
	h := newHistory(DefaultSampleEvery)
	now := warm(h, ct, newFakeClock().Now())
	allocs := testing.AllocsPerRun(20, func() {
		now = now.Add(DefaultSampleEvery)
		h.addTree(now, ct, -1, nil)
	})
	if allocs > 2*sources+3 {
		t.Errorf("%.0f allocations per sample of %d units in %d sources, want at most %d (two per source, and the listing)", allocs, sources*perSource, sources, 2*sources+3)
	}
	if got := h.view(now).Sources[0].Points; len(got) != len(h.ring) || rateOf(got[len(got)-1]) != "0" || lagOf(got[len(got)-1]) != "0" {
		t.Errorf("%d points, last %+v", len(got), got[len(got)-1])
	}
}

// The background sample reads the tree's structs (addTree) instead of
// marshalling and decoding it: both must give the same history, for every
// lag a unit can show, a member that did not answer, a handover (a unit on
// two nodes), a move and an id that does not start with its source.
func TestTreeSampleEqualsItsJSON(t *testing.T) {
	unit := func(name string, applied int64, lag float64) actors.UnitStatus {
		return actors.UnitStatus{Unit: name, Applied: applied, LagSeconds: lag}
	}
	node := func(name string, srcs ...actors.SourceStatus) NodeTree {
		return NodeTree{Tree: actors.Tree{Node: name, Sources: srcs}}
	}
	src := func(name string, units ...actors.UnitStatus) actors.SourceStatus {
		return actors.SourceStatus{Name: name, Units: units}
	}
	steps := []ClusterTree{
		{Nodes: []NodeTree{
			node("a", src("orders", unit("orders/0", 10, -1), unit("orders/1", 5, 3.5)), src("odd", unit("x", 1, 0))),
			node("b", src("orders", unit("orders/2", 7, 0)), src("empty")),
			failed("c", fmt.Errorf("down")),
		}},
		{Nodes: []NodeTree{
			// orders/1 hands over from a to b: b lists it first
			node("a", src("orders", unit("orders/0", 60, 0), unit("orders/1", 9, 1)), src("odd", unit("x", 4, 2))),
			node("b", src("orders", unit("orders/1", 0, 8), unit("orders/2", 30, -1))),
		}},
		{Nodes: []NodeTree{
			node("a", src("orders", unit("orders/0", 90, 7))),
			node("b", src("orders", unit("orders/1", 20, 0), unit("orders/2", 80, 4)), src("odd", unit("x", 2, -1))),
		}},
	}
	clk := newFakeClock()
	fromJSON, fromTree := newHistory(5*time.Second), newHistory(5*time.Second)
	for _, ct := range steps {
		clk.Advance(5 * time.Second)
		if err := fromJSON.addJSON(clk.Now(), []byte(mustJSON(t, ct))); err != nil {
			t.Fatal(err)
		}
		fromTree.addTree(clk.Now(), ct, -1, nil)
	}
	got, want := mustJSON(t, fromTree.view(clk.Now())), mustJSON(t, fromJSON.view(clk.Now()))
	if got != want {
		t.Errorf("history from the tree:\n%s\nfrom its JSON:\n%s", got, want)
	}
	var h History
	if err := json.Unmarshal([]byte(got), &h); err != nil {
		t.Fatal(err)
	}
	var moves []string
	for _, m := range h.Moves {
		moves = append(moves, m.Source+" "+m.Unit+" "+m.From+">"+m.To)
	}
	if s := fmt.Sprint(moves); s != "[orders orders/1 a>b odd x a>b]" {
		t.Errorf("moves %s, want orders/1 a→b at the third sample only (not at the handover), then x", s)
	}
}

// A unit that two nodes list in one sample (a handover in progress)
// counts once, where it was at the sample before, whichever node lists it
// first, and has not moved; it moves when only its new node lists it. A
// unit never seen before that two nodes list counts on the first.
func TestHistoryHandoverCountsWhereItWas(t *testing.T) {
	clk := newFakeClock()
	h := newHistory(5 * time.Second)
	steps := []sampleView{
		view1(unitAt{"a", "orders/0", 100, lag(1)}),
		// b lists orders/0 first, with a lag of its own: a's counts
		// (+50, lag 2); orders/1 is new on both: b's, a baseline
		view1(unitAt{"b", "orders/0", 40, lag(9)}, unitAt{"b", "orders/1", 10, nil}, unitAt{"a", "orders/0", 150, lag(2)}, unitAt{"a", "orders/1", 500, lag(30)}),
		// orders/0 now on b alone: moved, counts whole (60); orders/1
		// still on both, counts on b (+5)
		view1(unitAt{"a", "orders/1", 900, nil}, unitAt{"b", "orders/0", 60, lag(3)}, unitAt{"b", "orders/1", 15, nil}),
	}
	for i, v := range steps {
		if i > 0 {
			clk.Advance(5 * time.Second)
		}
		h.add(clk.Now(), v)
	}
	got := h.view(clk.Now())
	var rates, lags, units []string
	for _, p := range got.Sources[0].Points {
		rates, lags, units = append(rates, rateOf(p)), append(lags, lagOf(p)), append(units, fmt.Sprint(p.Units))
	}
	if s := strings.Join(rates, " "); s != "null 10 13" {
		t.Errorf("applied/s %s, want null 10 13 (+50 on a; then 60 whole on b + 5)", s)
	}
	if s := strings.Join(lags, " "); s != "1 2 3" {
		t.Errorf("lag_seconds %s, want 1 2 3 (the counted listing's only)", s)
	}
	if s := strings.Join(units, " "); s != "1 2 2" {
		t.Errorf("units %s, want 1 2 2 (a unit on two nodes counts once)", s)
	}
	if len(got.Moves) != 1 || got.Moves[0] != (Move{At: clk.Now(), Source: "orders", Unit: "orders/0", From: "a", To: "b"}) {
		t.Errorf("moves %+v, want orders/0 a→b at the last sample only", got.Moves)
	}
}

// The table of node names keeps only the nodes some remembered unit was
// last seen on: a cluster whose nodes come and go under new names does
// not grow it.
func TestHistoryForgetsNodeNames(t *testing.T) {
	clk := newFakeClock()
	h := newHistory(time.Minute)
	for i := range 40 {
		clk.Advance(time.Minute)
		h.add(clk.Now(), view1(unitAt{fmt.Sprintf("node-%d", i), "orders/0", int64(i), nil}, unitAt{"stays", "orders/1", 0, nil}))
	}
	if n := len(h.nodes.index); n != 2 {
		t.Errorf("%d node names kept, want 2 (orders/0's last and orders/1's)", n)
	}
	if n := len(h.nodes.names); n > 3 {
		t.Errorf("table of %d names for at most 3 at once", n)
	}
	if m := h.view(clk.Now()).Moves; len(m) != 11 || m[10].From != "node-38" || m[10].To != "node-39" {
		t.Errorf("moves %+v, want the last window's, the last node-38→node-39", m)
	}
}

// A unit's key is its id when the id names its source, and two units of
// different sources never share a key.
func TestUnitKeyOf(t *testing.T) {
	for _, c := range []struct{ source, unit, key string }{
		{"orders", "orders/0", "orders/0"},
		{"orders", "orders/a/b", "orders/a/b"},
		{"orders", "x", "orders\x00x"},
		{"orders", "orders", "orders\x00orders"},
		{"ord", "orders/0", "ord\x00orders/0"},
		{"a/b", "a/b/c", "a/b\x00a/b/c"}, // not "a/b/c": source a's unit a/b/c has that key
	} {
		if got := unitKeyOf(c.source, c.unit); got != c.key {
			t.Errorf("unitKeyOf(%q, %q) = %q, want %q", c.source, c.unit, got, c.key)
		}
	}
}
