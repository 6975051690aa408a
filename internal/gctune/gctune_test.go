package gctune

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/persistence/storetest"
)

const mb = 1 << 20

func TestPercent(t *testing.T) {
	p := Default
	for _, c := range []struct {
		name string
		rate float64
		live uint64
		want int
	}{
		{"idle: the floor", 1 * mb, 30 * mb, 25},
		{"between the bounds: headroom for 2 s of allocation", 4.5 * mb, 20 * mb, 45},
		{"under load: Go's default", 200 * mb, 30 * mb, 100},
		{"no live heap known yet", 1 * mb, 0, 100},
		{"nothing allocated", 0, 30 * mb, 25},
	} {
		if got := p.Percent(c.rate, c.live); got != c.want {
			t.Errorf("%s: Percent(%v, %v) = %d, want %d", c.name, c.rate, c.live, got, c.want)
		}
	}
}

// runtime is a fake of what the tuner reads and sets.
type fakeRuntime struct {
	mu      sync.Mutex
	r       Reading
	sets    []int
	percent int
}

func (f *fakeRuntime) read() Reading {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.r
	r.Percent = f.percent
	return r
}

func (f *fakeRuntime) set(v int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	was := f.percent
	f.percent = v
	f.sets = append(f.sets, v)
	return was
}

// allocate adds n bytes to the allocation counter and sets the live heap.
func (f *fakeRuntime) allocate(n, live uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.r.Allocated += n
	f.r.Live = live
}

func (f *fakeRuntime) setsSoFar() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.sets)
}

// TestStartFollowsTheAllocationRate: idle, the tuner lowers GOGC to the
// floor; a burst of allocation puts Go's default back at the next reading;
// a change smaller than Step is left alone; stop restores the process's
// own GOGC and no reading runs after it.
func TestStartFollowsTheAllocationRate(t *testing.T) {
	c := storetest.NewClock(time.Unix(1_000_000, 0))
	f := &fakeRuntime{percent: 100, r: Reading{Live: 30 * mb}}
	var told []int
	stop := start(c, Default, f.read, f.set, func(v int) { told = append(told, v) })

	f.allocate(1*mb, 30*mb) // 1 MB/s
	c.Advance(time.Second)
	if got := f.setsSoFar(); !slices.Equal(got, []int{25}) {
		t.Fatalf("idle: GOGC set to %v, want [25]", got)
	}
	f.allocate(500*mb, 30*mb) // 500 MB/s
	c.Advance(time.Second)
	f.allocate(20*mb, 40*mb) // 20 MB/s over 40 MB live: 100 (the cap)
	c.Advance(time.Second)
	f.allocate(11*mb, 40*mb) // 11 MB/s: 55
	c.Advance(time.Second)
	f.allocate(10.5*mb, 40*mb) // 10.5 MB/s: 53, less than Step from 55
	c.Advance(time.Second)
	if got, want := f.setsSoFar(), []int{25, 100, 55}; !slices.Equal(got, want) {
		t.Fatalf("GOGC set to %v, want %v", got, want)
	}
	if !slices.Equal(told, []int{25, 100, 55}) {
		t.Fatalf("changed was told %v, want [25 100 55]", told)
	}
	stop()
	if got := f.setsSoFar(); got[len(got)-1] != 100 {
		t.Fatalf("after stop GOGC is %d, want the process's own 100", got[len(got)-1])
	}
	n := len(f.setsSoFar())
	f.allocate(1*mb, 30*mb)
	c.Advance(10 * time.Second)
	if got := f.setsSoFar(); len(got) != n {
		t.Fatalf("the tuner set GOGC after stop: %v", got)
	}
	stop() // twice is harmless
}

// TestReadRuntime: the runtime's counters are there and move.
func TestReadRuntime(t *testing.T) {
	a := readRuntime()
	sink = make([]byte, 1<<20)
	b := readRuntime()
	if b.Allocated < a.Allocated+1<<20 {
		t.Fatalf("allocated went from %d to %d after a 1 MiB allocation", a.Allocated, b.Allocated)
	}
	if b.Percent != 100 && b.Percent <= 0 {
		t.Fatalf("GOGC read as %d", b.Percent)
	}
}

var sink []byte
