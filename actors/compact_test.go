package actors

import (
	"fmt"
	"runtime"
	"testing"
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

// What the copy gives back: a map of 100,000 entries emptied one by one
// through compacted keeps far less heap than one emptied without it.
func TestCompactedGivesBackTheRoom(t *testing.T) {
	keys := make([]string, 100_000)
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
	freedPlain, freedCompacted := retained(false), retained(true)
	// 100,000 entries take well over 2 MB of buckets
	if freedCompacted < freedPlain+2<<20 {
		t.Errorf("emptied through compacted the map gave back %d bytes, without it %d: want 2 MB more", freedCompacted, freedPlain)
	}
}

func heapAlloc() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
