package bench_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/cluster/bench"
	"github.com/drover-dev/drover/cluster/config"
	"github.com/drover-dev/drover/cluster/node"
	"github.com/drover-dev/drover/internal/freeport"
	"github.com/drover-dev/drover/persistence/stores"
)

var (
	idleUnits       = flag.Int("idle.units", 2000, "units of BenchmarkIdleHeap")
	idleHeapProfile = flag.String("idle.heapprofile", "", "write BenchmarkIdleHeap's heap profile (inuse) here")
	idleCPUProfile  = flag.String("idle.cpuprofile", "", "write a CPU profile of BenchmarkIdleHeap's idle node (over -idle.cpuwindow) here")
	idleAllocs      = flag.String("idle.allocprofile", "", "write heap profiles at the start (FILE.start) and end (FILE) of -idle.cpuwindow here: go tool pprof -sample_index alloc_space -base FILE.start FILE")
	idleCPUWindow   = flag.Duration("idle.cpuwindow", 10*time.Second, "how long -idle.cpuprofile profiles the idle node")
)

// BenchmarkIdleHeap is the per-unit heap of idle units, by retainer: a
// node in this process with -idle.units idle memory-source units on
// SQLite (the node of drover bench --idle), measured once every unit has
// opened and passivated, after a GC (the least of six samples 0.7 s apart). It reports
// heap-B/unit (live heap above the process before the node started),
// inuse-B/unit (the heap's spans in use: the live heap and the room
// between the objects that outlived the start-up), retained-B/unit (the
// heap's pages not returned to the OS), stack-B/unit and goroutines/unit, and writes the heap profile to
// -idle.heapprofile (and a CPU profile of -idle.cpuwindow idle, 10 s by
// default, to -idle.cpuprofile).
// Run it with -benchtime 1x:
//
//	go test ./cluster/bench -run '^$' -bench IdleHeap -benchtime 1x -idle.units 10000 -idle.heapprofile /tmp/idle.heap
//	go tool pprof -sample_index inuse_space -top /tmp/idle.heap
func BenchmarkIdleHeap(b *testing.B) {
	if *idleHeapProfile != "" {
		defer func(was int) { runtime.MemProfileRate = was }(runtime.MemProfileRate)
		runtime.MemProfileRate = 1024 // every retainer of the units, not a sample
	}
	for range b.N {
		idleHeap(b, *idleUnits)
	}
}

func idleHeap(b *testing.B, units int) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := b.TempDir()
	storeURL := "sqlite:" + filepath.Join(dir, "idle.db")
	ports, err := freeport.Take(1)
	if err != nil {
		b.Fatal(err)
	}
	yaml, names, sizes := bench.IdleConfig("idle-heap", ports[0], units)
	cfg, err := config.Parse([]byte(yaml), config.Options{LookupEnv: func(name string) (string, bool) {
		return storeURL, name == bench.IdleStoreEnv
	}})
	if err != nil {
		b.Fatal(err)
	}
	st, err := stores.Open(ctx, storeURL, stores.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	before := liveHeap()
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)
	n, err := node.Start(ctx, cfg, node.Options{Version: "bench", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), time.Minute)
		defer scancel()
		if err := n.Shutdown(sctx); err != nil {
			b.Error(err)
		}
	}()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for opened := 0; opened < units; {
		opened = 0
		for i, src := range names {
			if cps, err := st.Checkpoints(ctx, src); err == nil {
				opened += min(len(cps), sizes[i])
			}
		}
		select {
		case <-ctx.Done():
			b.Fatalf("%d of %d units opened: %v", opened, units, ctx.Err())
		case <-tick.C:
		}
	}
	// the units passivate (actors.Tuning.PassivateAfter after their start),
	// then a few renewal rounds, so that what a round leaves behind is
	// counted
	wait := actors.DefaultPassivateAfter + 3*time.Second
	if *idleCPUProfile != "" {
		f, err := os.Create(*idleCPUProfile)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Fatal(err)
		}
		wait = *idleCPUWindow
	}
	if *idleAllocs != "" {
		wait = *idleCPUWindow
		runtime.GC() // the profile counts up to the last collection
		writeHeap(b, *idleAllocs+".start")
	}
	select {
	case <-ctx.Done():
		b.Fatal(ctx.Err())
	case <-time.After(wait):
	}
	if *idleCPUProfile != "" {
		pprof.StopCPUProfile() // before the collections below
	}
	if *idleAllocs != "" {
		runtime.GC()
		writeHeap(b, *idleAllocs)
	}
	// The least of a few samples: a renewal round in flight (every lease
	// extended once per TTL/2) is transient, not what a unit retains.
	var after uint64
	var profile bytes.Buffer
	for i := range 6 {
		if i > 0 {
			select {
			case <-ctx.Done():
				b.Fatal(ctx.Err())
			case <-time.After(700 * time.Millisecond):
			}
		}
		h := liveHeap()
		if i > 0 && h >= after {
			continue
		}
		after = h
		profile.Reset()
		if err := pprof.Lookup("heap").WriteTo(&profile, 0); err != nil {
			b.Fatal(err)
		}
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	b.ReportMetric(float64(after-before)/float64(units), "heap-B/unit")
	// the spans the live heap occupies: above heap-B/unit by what the
	// start-up left partly used (objects that outlived their neighbours)
	b.ReportMetric(float64(int64(m.HeapInuse)-int64(m0.HeapInuse))/float64(units), "inuse-B/unit")
	b.ReportMetric(float64(int64(m.HeapInuse-m.HeapReleased+m.HeapIdle)-int64(m0.HeapInuse-m0.HeapReleased+m0.HeapIdle))/float64(units), "retained-B/unit")
	b.ReportMetric(float64(m.StackInuse)/float64(units), "stack-B/unit")
	b.ReportMetric(float64(runtime.NumGoroutine())/float64(units), "goroutines/unit")
	if *idleHeapProfile != "" {
		if err := os.WriteFile(*idleHeapProfile, profile.Bytes(), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	fmt.Fprintf(os.Stderr, "idle heap: %d units, %.0f bytes per unit live, %.0f in spans in use\n", units,
		float64(after-before)/float64(units), float64(int64(m.HeapInuse)-int64(m0.HeapInuse))/float64(units))
}

// liveHeap is the live heap after a collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// writeHeap writes the heap profile (allocations since the start, too)
// to path.
func writeHeap(b *testing.B, path string) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}
