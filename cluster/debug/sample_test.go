package debug

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/actors/placement"
)

// counterNode is a fakeNode that reads its units' counters from the tree
// it would answer, without counting a call of Tree.
type counterNode struct {
	*fakeNode
	name string
}

func (c *counterNode) Name() string { return c.name }

func (c *counterNode) Counters(buf []actors.SourceCounters) []actors.SourceCounters {
	c.mu.Lock()
	t := c.trees[min(c.calls, len(c.trees)-1)]
	c.mu.Unlock()
	buf = buf[:0]
	for _, s := range t.Sources {
		sc := actors.SourceCounters{Name: s.Name}
		for _, u := range s.Units {
			sc.Units = append(sc.Units, actors.UnitCounters{Unit: u.Unit, Applied: u.Applied, LagSeconds: u.LagSeconds})
		}
		buf = append(buf, sc)
	}
	return buf
}

// A sample of a CounterReader node reads this node's counters instead of
// a snapshot of its tree, and gives the history that the tree gives; a
// caller that shares its fan-out still gets this node's whole tree.
func TestSampleReadsThisNodesCounters(t *testing.T) {
	clk := newFakeClock()
	b := start(t, Config{Node: &fakeNode{trees: []actors.Tree{withUnits("b", "orders/1")}}})
	at := func(applied int64, lag float64) actors.Tree {
		tr := withUnits("a", "orders/0", "orders/2")
		tr.Sources[0].Units[0].Applied, tr.Sources[0].Units[0].LagSeconds = applied, lag
		return tr
	}
	fn := &fakeNode{trees: []actors.Tree{at(100, -1)}}
	fn.setMembers(placement.Member{Name: "a"}, placement.Member{Name: "b", DebugAddr: b.Addr()})
	a := &counterNode{fakeNode: fn, name: "a"}
	s := start(t, Config{Node: a, Clock: clk})
	want := newHistory(s.cfg.SampleEvery)
	for i, tr := range []actors.Tree{at(100, -1), at(160, 2.5)} {
		fn.mu.Lock()
		fn.trees = []actors.Tree{tr}
		fn.mu.Unlock()
		clk.Advance(5 * time.Second)
		if err := s.Sample(t.Context()); err != nil {
			t.Fatal(err)
		}
		full, err := s.fanOut(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		want.addTree(clk.Now(), full.ct, -1, nil)
		if i == 0 {
			fn.mu.Lock()
			fn.calls = 0
			fn.mu.Unlock()
		}
	}
	if got, want := mustJSON(t, s.hist.view(clk.Now())), mustJSON(t, want.view(clk.Now())); got != want {
		t.Errorf("history from the counters:\n%s\nfrom the trees:\n%s", got, want)
	}
	fn.mu.Lock()
	calls := fn.calls
	fn.mu.Unlock()
	if calls != 1 {
		t.Errorf("%d snapshots of the tree for a sample and a full fan-out, want 1 (the full one's)", calls)
	}
	lazy, err := s.fanOut(t.Context(), a)
	if err != nil {
		t.Fatal(err)
	}
	if !lazy.lazy || len(lazy.ct.Nodes[lazy.self].Sources) != 0 {
		t.Fatalf("the sample's fan-out holds this node's tree: %+v", lazy.ct.Nodes[lazy.self])
	}
	full, err := s.fanOut(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := mustJSON(t, lazy.tree(a)), mustJSON(t, full.tree(a)); got != want {
		t.Errorf("a caller sharing the sample's fan-out got\n%s\nwant\n%s", got, want)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
