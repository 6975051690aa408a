package actors

import (
	"fmt"
	"testing"
	"time"
)

// Counters lists the units the tree shows, in its order, with the same
// applied and lag_seconds, and a read into the last read's buffer
// allocates nothing.
func TestCountersAreTheTreesCounters(t *testing.T) {
	now := time.Unix(1000, 0)
	r := newRegistry("n1")
	r.now = func() time.Time { return now }
	r.addSource("b", "memory")
	r.addSource("a", "memory")
	r.addSource("empty", "memory")
	for i := range 300 {
		for _, src := range []string{"a", "b"} {
			gen := r.addUnit(src, fmt.Sprintf("%s/%d", src, i))
			r.unit(src, fmt.Sprintf("%s/%d", src, i), gen, func(u *treeUnit) {
				u.applied = int64(7 * i)
				switch i % 3 {
				case 0:
					u.setLag(Lag{Messages: 3, Oldest: now.Add(-time.Duration(i) * time.Millisecond), Known: true})
				case 1:
					u.setLag(unknownLag)
				}
			})
		}
	}
	want := r.snapshot()
	got := r.counters(nil)
	if len(got) != len(want) {
		t.Fatalf("%d sources, want %d", len(got), len(want))
	}
	for i, s := range want {
		if got[i].Name != s.Name || len(got[i].Units) != len(s.Units) {
			t.Fatalf("source %d: %s of %d units, want %s of %d", i, got[i].Name, len(got[i].Units), s.Name, len(s.Units))
		}
		for j, u := range s.Units {
			if c := got[i].Units[j]; c != (UnitCounters{Unit: u.Unit, Applied: u.Applied, LagSeconds: u.LagSeconds}) {
				t.Fatalf("%s unit %d: %+v, the tree shows %s %d %g", s.Name, j, c, u.Unit, u.Applied, u.LagSeconds)
			}
		}
	}
	if allocs := testing.AllocsPerRun(10, func() { got = r.counters(got) }); allocs != 0 {
		t.Errorf("%.0f allocations per read into the last one's buffer, want 0", allocs)
	}
}

// BenchmarkTreeRead is what the debug history's sample of a node of
// 10,000 units (10 sources) reads: a snapshot of the tree, or the
// counters into the last read's buffer.
func BenchmarkTreeRead(b *testing.B) {
	r := newRegistry("n1")
	for s := range 10 {
		src := fmt.Sprintf("source-%d", s)
		r.addSource(src, "memory")
		for u := range 1000 {
			r.addUnit(src, fmt.Sprintf("%s/%d", src, u))
		}
	}
	b.Run("snapshot", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = r.snapshot()
		}
	})
	b.Run("counters", func(b *testing.B) {
		buf := r.counters(nil)
		b.ReportAllocs()
		for b.Loop() {
			buf = r.counters(buf)
		}
	})
}
