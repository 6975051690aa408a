package actors

import (
	"fmt"
	"runtime"
	"testing"
	"time"
	"unsafe"
)

// compacted copies a map once it holds under a quarter of its peak, with
// the same entries, and leaves it alone above that.
func TestCompactedCopiesShrunkMaps(t *testing.T) {
	m, peak := map[string]int{}, 0
	for i := range 1000 {
		m[fmt.Sprint(i)] = i
		peak = max(peak, len(m))
	}
	first := fmt.Sprintf("%p", m)
	for i := range 750 {
		delete(m, fmt.Sprint(i))
		m, peak = compacted(m, peak)
	}
	if got := fmt.Sprintf("%p", m); got != first || peak != 1000 {
		t.Fatalf("a map at a quarter of its peak was copied (peak %d)", peak)
	}
	delete(m, "750")
	m, peak = compacted(m, peak)
	if fmt.Sprintf("%p", m) == first || peak != 249 || len(m) != 249 {
		t.Fatalf("a map under a quarter of its peak: same map %v, peak %d, %d entries", fmt.Sprintf("%p", m) == first, peak, len(m))
	}
	for i := 751; i < 1000; i++ {
		if m[fmt.Sprint(i)] != i {
			t.Fatalf("entry %d lost in the copy", i)
		}
	}
}

// What the copy gives back: a map of 50,000 entries emptied one by one
// through compacted keeps far less heap than one emptied without it.
func TestCompactedGivesBackTheRoom(t *testing.T) {
	keys := make([]string, 50_000)
	for i := range keys {
		keys[i] = fmt.Sprint("node/source-s/", i)
	}
	retained := func(compact bool) uint64 {
		m, peak := map[string]*child{}, 0
		c := &child{}
		for _, k := range keys {
			m[k] = c
			peak = max(peak, len(m))
		}
		before := heapAlloc()
		for _, k := range keys {
			delete(m, k)
			if compact {
				m, peak = compacted(m, peak)
			}
		}
		after := heapAlloc()
		runtime.KeepAlive(m)
		return before - min(before, after)
	}
	// The heap is the process's: other goroutines of the test binary
	// allocate meanwhile. The best of a few attempts is the map's own
	// difference (it never shows where there is none).
	var freedPlain, freedCompacted uint64
	for range 5 {
		freedPlain, freedCompacted = retained(false), retained(true)
		// 50,000 entries take well over 1 MB of buckets
		if freedCompacted >= freedPlain+1<<20 {
			return
		}
	}
	t.Errorf("emptied through compacted the map gave back %d bytes, without it %d: want 1 MB more", freedCompacted, freedPlain)
}

func heapAlloc() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// A passive unit's record is small (one per idle unit), and its stamps
// give the times back: the zero time, the Unix epoch and a clock's time
// (its monotonic reading dropped) all survive.
func TestPassiveRecordIsSmallAndKeepsItsTimes(t *testing.T) {
	// 240: persistence.Lease carries the previous holder of a takeover
	// (PrevOwner, PrevToken: issue 13's events) since this bound was set
	// at 216.
	if n := unsafe.Sizeof(passiveUnit{}); n > 240 {
		t.Errorf("a passive unit's record takes %d bytes, want at most 240", n)
	}
	now := time.Now()
	for _, tm := range []time.Time{{}, time.Unix(0, 0), now, time.Date(2026, 1, 1, 0, 0, 0, 1, time.UTC)} {
		got := stampOf(tm).time()
		if !got.Equal(tm) || got.IsZero() != tm.IsZero() {
			t.Errorf("stamp of %v gives %v", tm, got)
		}
	}
	if d := now.Add(time.Second).Sub(stampOf(now).time()); d != time.Second {
		t.Errorf("a second after a stamped time is %v after it", d)
	}
}

// The tree's unit entries come from the registry's slab: a unit stopped
// and another started takes the entry given back (no allocation), which
// shows nothing of the one before.
func TestRegistryReusesUnitEntries(t *testing.T) {
	r := newRegistry("n1")
	r.addSource("s", "memory")
	gen := r.addUnit("s", "s/0")
	r.unit("s", "s/0", gen, func(st *treeUnit) { st.applied = 5; st.setError("boom", time.Unix(1, 0)) })
	r.removeUnit("s", "s/0", gen)
	allocs := testing.AllocsPerRun(100, func() {
		gen := r.addUnit("s", "s/1")
		r.removeUnit("s", "s/1", gen)
	})
	if allocs != 0 {
		t.Errorf("a unit's entry costs %v allocations once one was given back, want 0", allocs)
	}
	r.addUnit("s", "s/2")
	got := r.snapshot()[0].Units
	if len(got) != 1 || got[0].Unit != "s/2" || got[0].Applied != 0 || got[0].LastError != "" || got[0].State != StateStarting {
		t.Errorf("the reused entry shows %+v, want a new unit s/2", got)
	}
}
