package debug

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/actors/placement"
)

func lag(v float64) *float64 { return &v }

// view1 is a cluster sample of one source's units, each given as
// node, unit, applied and lag_seconds (nil: the unit has no such field).
type unitAt struct {
	node, unit string
	applied    int64
	lag        *float64
}

func view1(units ...unitAt) sampleView {
	var v sampleView
	idx := map[string]int{}
	for _, u := range units {
		i, ok := idx[u.node]
		if !ok {
			i = len(v.Nodes)
			idx[u.node] = i
			v.Nodes = append(v.Nodes, sampleNode{Node: u.node, Sources: []sampleSource{{Name: "orders"}}})
		}
		src := &v.Nodes[i].Sources[0]
		src.Units = append(src.Units, sampleUnit{Unit: u.unit, Applied: u.applied, LagSeconds: u.lag})
	}
	return v
}

func rateOf(p Point) string {
	if p.AppliedPerSec == nil {
		return "null"
	}
	return fmt.Sprintf("%g", *p.AppliedPerSec)
}

func lagOf(p Point) string {
	if p.LagSeconds == nil {
		return "null"
	}
	return fmt.Sprintf("%g", *p.LagSeconds)
}

func TestHistoryRatesFromCounterDeltas(t *testing.T) {
	clk := newFakeClock()
	h := newHistory(5 * time.Second)
	steps := []sampleView{
		// baseline: no rate yet
		view1(unitAt{"a", "orders/0", 100, lag(2)}, unitAt{"a", "orders/1", 1000, nil}),
		// +500 and +0 in 5 s: 100/s; lag is the largest reported
		view1(unitAt{"a", "orders/0", 600, lag(1.5)}, unitAt{"a", "orders/1", 1000, lag(4)}),
		// orders/0 restarted (its counter began again, at 50); orders/1
		// moved to b (its new owner counts from 0: 200 applied there)
		view1(unitAt{"a", "orders/0", 50, lag(-1)}, unitAt{"b", "orders/1", 200, nil}),
		// a handover: orders/1 listed on a (first) and on b; it counts
		// on b, where it was, and has not moved yet
		view1(unitAt{"a", "orders/0", 100, nil}, unitAt{"a", "orders/1", 7, nil}, unitAt{"b", "orders/1", 250, nil}),
	}
	for i, v := range steps {
		if i > 0 {
			clk.Advance(5 * time.Second)
		}
		h.add(clk.Now(), v)
	}
	// The same instant again is not a second sample.
	h.add(clk.Now(), steps[0])
	got := h.view(clk.Now())
	if len(got.Sources) != 1 || got.Sources[0].Name != "orders" {
		t.Fatalf("sources %+v", got.Sources)
	}
	var rates, lags []string
	for _, p := range got.Sources[0].Points {
		rates, lags = append(rates, rateOf(p)), append(lags, lagOf(p))
	}
	if s := strings.Join(rates, " "); s != "null 100 50 20" {
		t.Errorf("applied/s %s, want null 100 50 20 (500 in 5 s; then 50 after the restart + 200 on the new owner; then 50 + 50)", s)
	}
	if s := strings.Join(lags, " "); s != "2 4 null null" {
		t.Errorf("lag_seconds %s, want 2 4 null null (-1 and missing are no data)", s)
	}
	if len(got.Moves) != 1 || got.Moves[0] != (Move{At: clk.Now().Add(-5 * time.Second), Source: "orders", Unit: "orders/1", From: "a", To: "b"}) {
		t.Errorf("moves %+v, want orders/1 a→b at the third sample", got.Moves)
	}
	if got.Sources[0].Points[3].Units != 2 {
		t.Errorf("a unit on two nodes counts once: %d units", got.Sources[0].Points[3].Units)
	}
}

func TestHistoryIsBoundedToItsWindow(t *testing.T) {
	clk := newFakeClock()
	h := newHistory(time.Minute)
	if len(h.ring) != 11 {
		t.Fatalf("ring of %d for a minute's samples, want 11", len(h.ring))
	}
	for i := range 30 {
		if i > 0 {
			clk.Advance(time.Minute)
		}
		h.add(clk.Now(), view1(unitAt{"a", "orders/0", int64(60 * i), nil}, unitAt{"a", fmt.Sprintf("orders/%d", 100+i), 0, nil}))
	}
	got := h.view(clk.Now())
	pts := got.Sources[0].Points
	if len(pts) != 11 || !pts[0].At.Equal(clk.Now().Add(-HistoryWindow)) || !pts[10].At.Equal(clk.Now()) {
		t.Fatalf("%d points from %v to %v, want 11 over the last 10 minutes", len(pts), pts[0].At, pts[len(pts)-1].At)
	}
	if r := rateOf(pts[10]); r != "1" {
		t.Errorf("applied/s %s, want 1", r)
	}
	// A unit not seen for a window is forgotten.
	if len(h.units) > 12 {
		t.Errorf("%d units remembered, want at most the last window's", len(h.units))
	}
	// Samples older than the window are not served, however few came since.
	clk.Advance(HistoryWindow - time.Minute)
	if pts := h.view(clk.Now()).Sources[0].Points; len(pts) != 2 {
		t.Errorf("%d points 9 minutes after the last sample, want 2", len(pts))
	}
	if h := newHistory(time.Millisecond); len(h.ring) != maxSamples {
		t.Errorf("ring of %d for 1 ms samples, want the bound %d", len(h.ring), maxSamples)
	}
}

func TestHistoryBoundsTheMovesOfOneSample(t *testing.T) {
	clk := newFakeClock()
	h := newHistory(5 * time.Second)
	var before, after []unitAt
	for i := range maxMovesPerSample + 10 {
		before = append(before, unitAt{"a", fmt.Sprintf("orders/%d", i), 0, nil})
		after = append(after, unitAt{"b", fmt.Sprintf("orders/%d", i), 0, nil})
	}
	h.add(clk.Now(), view1(before...))
	clk.Advance(5 * time.Second)
	h.add(clk.Now(), view1(after...))
	if got := h.view(clk.Now()); len(got.Moves) != maxMovesPerSample || got.MovesDropped != 10 {
		t.Fatalf("%d moves, %d dropped; want %d and 10", len(got.Moves), got.MovesDropped, maxMovesPerSample)
	}
}

// The background sampler samples at Start and then on each SampleEvery of
// the injected clock; GET /debug/history serves the ring, behind the token
// like every read route; lag_seconds is read from the unit JSON.
func TestHistoryRouteAndSampler(t *testing.T) {
	clk := newFakeClock()
	b := start(t, Config{Token: "tok", Node: &fakeNode{trees: []actors.Tree{withUnits("b", "orders/1")}}})
	a := &fakeNode{trees: []actors.Tree{withUnits("a", "orders/0"), withUnits("a")}}
	a.setMembers(placement.Member{Name: "a"}, placement.Member{Name: "b", DebugAddr: b.Addr()})
	s := start(t, Config{Token: "tok", Node: a, Clock: clk, SampleEvery: 5 * time.Second, MembersAuthenticated: true})
	samples := func() int {
		s.hist.mu.Lock()
		defer s.hist.mu.Unlock()
		return s.hist.next
	}
	if !waitFor(10*time.Second, func() bool { return samples() == 1 && clk.pending() == 1 }) {
		t.Fatalf("no sample at Start: %d samples, %d timers", samples(), clk.pending())
	}
	clk.Advance(4 * time.Second)
	if samples() != 1 {
		t.Fatalf("a sample before SampleEvery passed")
	}
	clk.Advance(time.Second)
	if !waitFor(10*time.Second, func() bool { return samples() == 2 && clk.pending() == 1 }) {
		t.Fatalf("no sample after SampleEvery: %d", samples())
	}
	url := "http://" + s.Addr() + "/debug/history"
	if r := get(t, url); r.code != 401 {
		t.Fatalf("history without the token: %d", r.code)
	}
	r := get(t, url, "Authorization", "Bearer tok")
	if r.code != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
		t.Fatalf("history: %d %q", r.code, r.body)
	}
	var h History
	if err := json.Unmarshal([]byte(r.body), &h); err != nil {
		t.Fatal(err)
	}
	if h.WindowSeconds != 600 || h.EverySeconds != 5 || len(h.Sources) != 1 || len(h.Sources[0].Points) != 2 {
		t.Fatalf("history %s", r.body)
	}
	// orders/0 left a between the samples and nobody holds it: no move;
	// orders/1 stayed on b with the same count: 0 applied/s.
	if p := h.Sources[0].Points[1]; rateOf(p) != "0" || p.Units != 1 || len(h.Moves) != 0 {
		t.Errorf("second point %+v, moves %+v", p, h.Moves)
	}
	// lag_seconds comes from the unit JSON, whichever Go type carries it.
	if err := s.hist.addJSON(clk.Now().Add(time.Second), []byte(`{"nodes":[{"node":"a","sources":[{"name":"orders","units":[{"unit":"orders/0","applied":3,"lag_seconds":7.5}]}]}]}`)); err != nil {
		t.Fatal(err)
	}
	if pts := s.hist.view(clk.Now().Add(time.Second)).Sources[0].Points; lagOf(pts[2]) != "7.5" {
		t.Errorf("lag_seconds from JSON: %s", lagOf(pts[2]))
	}
}

// The background sample reads the cluster tree's structs (viewOf) instead
// of marshalling and decoding it: both must give the same history, for
// every lag a unit can show (unknown -1, caught up 0, behind) and for a
// member that did not answer.
func TestViewOfTreeEqualsItsJSON(t *testing.T) {
	unit := func(name string, applied int64, lag float64) actors.UnitStatus {
		return actors.UnitStatus{Unit: name, Applied: applied, LagSeconds: lag}
	}
	tree := func(node string, applied int64, lags ...float64) NodeTree {
		src := actors.SourceStatus{Name: "orders"}
		for i, l := range lags {
			src.Units = append(src.Units, unit(fmt.Sprintf("orders/%s-%d", node, i), applied*int64(i+1), l))
		}
		return NodeTree{Tree: actors.Tree{Node: node, Sources: []actors.SourceStatus{src, {Name: "audit", Units: []actors.UnitStatus{unit("audit/"+node, applied, -1)}}}}}
	}
	steps := []ClusterTree{
		{Nodes: []NodeTree{tree("a", 10, -1, 0, 3.5), tree("b", 5, 2), failed("c", fmt.Errorf("down"))}},
		{Nodes: []NodeTree{tree("a", 60, 0, 0, 1.25), tree("b", 30, -1)}},
		{Nodes: []NodeTree{tree("a", 90, 7, -1, 0), tree("b", 80, 4)}},
	}
	clk := newFakeClock()
	fromJSON, fromTree := newHistory(5*time.Second), newHistory(5*time.Second)
	for _, ct := range steps {
		clk.Advance(5 * time.Second)
		b, err := json.Marshal(ct)
		if err != nil {
			t.Fatal(err)
		}
		if err := fromJSON.addJSON(clk.Now(), b); err != nil {
			t.Fatal(err)
		}
		fromTree.add(clk.Now(), viewOf(ct))
	}
	want, err := json.Marshal(fromJSON.view(clk.Now()))
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(fromTree.view(clk.Now()))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("history from the tree:\n%s\nfrom its JSON:\n%s", got, want)
	}
	if !strings.Contains(string(want), `"lag_seconds":7`) || !strings.Contains(string(want), `"lag_seconds":null`) {
		t.Errorf("the steps should give a known and an unknown lag: %s", want)
	}
}
