// Package gctune sets the Go collector's GOGC from the process's
// allocation rate: low while the process allocates little, Go's default
// (100) under load.
//
// Why: with GOGC=100 the heap grows to twice the live heap before each
// collection, whatever the rate it grows at. A node of 10,000 idle units
// holds about 25 MB live and allocates 1-2 MB/s; at GOGC=100 it keeps
// another 25 MB of heap resident that only garbage passes through, a
// collection every 15 s or so. Idle units are meant to cost almost
// nothing, and that headroom was half of what they cost. At GOGC=25 the
// same node collects every few seconds, each collection a few
// milliseconds of marking: far below 1 % of a core. Under load the rate
// is hundreds of MB/s and a low GOGC would collect many times a second,
// so the tuner asks for headroom enough for Spacing of allocation:
// GOGC = 100 × rate × Spacing / live, kept within [Min, Max].
//
// It reads the runtime's own counters (runtime/metrics) every Every and
// changes GOGC only when the wanted value moved by Step or more (or hit a
// bound), so a steady process sets it once. The decision (Policy.Percent)
// is a pure function of the readings; Start only wires it to a clock, the
// runtime's counters and debug.SetGCPercent.
package gctune

import (
	"math"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"

	"github.com/drover-dev/drover/internal/clock"
)

// Policy bounds the tuner's GOGC.
type Policy struct {
	// Min and Max bound GOGC. Max is what a process under load runs at.
	Min, Max int
	// Spacing is the least time between two collections the tuner aims
	// for at the current allocation rate.
	Spacing time.Duration
	// Every is how often the counters are read.
	Every time.Duration
	// Step is the least change of the wanted GOGC that is applied.
	Step int
}

// Default is the node's policy.
var Default = Policy{Min: 25, Max: 100, Spacing: 2 * time.Second, Every: time.Second, Step: 5}

// Reading is what the tuner reads of the runtime.
type Reading struct {
	Allocated uint64 // heap bytes allocated since the process started
	Live      uint64 // live heap bytes as of the last collection
	Percent   int    // GOGC now (0 when off or unknown)
}

// Percent is the GOGC for allocating rate bytes per second with a live
// heap of live bytes: headroom for Spacing of allocation, within [Min,
// Max]. An unknown live heap (0, before the first collection) gets Max.
func (p Policy) Percent(rate float64, live uint64) int {
	if live == 0 || math.IsNaN(rate) || math.IsInf(rate, 0) {
		return p.Max
	}
	want := 100 * max(rate, 0) * p.Spacing.Seconds() / float64(live)
	if want >= float64(p.Max) {
		return p.Max
	}
	return max(p.Min, int(math.Ceil(want)))
}

// tuner turns successive readings into GOGC changes.
type tuner struct {
	policy  Policy
	last    Reading
	lastAt  time.Time
	percent int // as last set; 0 before the first set
}

// observe takes the reading r of now and returns the GOGC to set, or 0
// to leave it as it is. The first reading only sets the baseline.
func (t *tuner) observe(now time.Time, r Reading) int {
	prev, prevAt := t.last, t.lastAt
	t.last, t.lastAt = r, now
	if prevAt.IsZero() || !now.After(prevAt) || r.Allocated < prev.Allocated {
		return 0
	}
	rate := float64(r.Allocated-prev.Allocated) / now.Sub(prevAt).Seconds()
	want := t.policy.Percent(rate, r.Live)
	switch {
	case want == t.percent:
		return 0
	case t.percent != 0 && want != t.policy.Min && want != t.policy.Max && abs(want-t.percent) < t.policy.Step:
		return 0
	}
	t.percent = want
	return want
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// Start reads the runtime every p.Every on c and sets GOGC as p says
// until the returned stop is called; stop puts back the GOGC the process
// had. changed, when not nil, is told each new value.
func Start(c clock.Clock, p Policy, changed func(percent int)) (stop func()) {
	return start(c, p, readRuntime, debug.SetGCPercent, changed)
}

func start(c clock.Clock, p Policy, read func() Reading, set func(int) int, changed func(int)) (stop func()) {
	t := &tuner{policy: p}
	var (
		mu      sync.Mutex
		stopped bool
		timer   clock.Timer
		tick    func()
	)
	tick = func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		if v := t.observe(c.Now(), read()); v != 0 {
			set(v)
			if changed != nil {
				changed(v)
			}
		}
		timer = clock.AfterFunc(c, p.Every, "gctune", tick)
	}
	orig := read().Percent
	mu.Lock()
	t.observe(c.Now(), read())
	timer = clock.AfterFunc(c, p.Every, "gctune", tick)
	mu.Unlock()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		stopped = true
		timer.Stop()
		if t.percent != 0 && orig > 0 {
			set(orig)
		}
	}
}

// readRuntime reads the counters.
func readRuntime() Reading {
	samples := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/heap/live:bytes"}, {Name: "/gc/gogc:percent"}}
	metrics.Read(samples)
	var r Reading
	if samples[0].Value.Kind() == metrics.KindUint64 {
		r.Allocated = samples[0].Value.Uint64()
	}
	if samples[1].Value.Kind() == metrics.KindUint64 {
		r.Live = samples[1].Value.Uint64()
	}
	if samples[2].Value.Kind() == metrics.KindUint64 {
		r.Percent = int(samples[2].Value.Uint64())
	}
	return r
}
