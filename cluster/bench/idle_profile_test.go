package bench

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"github.com/drover-dev/drover/cluster/config"
	"github.com/drover-dev/drover/cluster/node"
	"github.com/drover-dev/drover/internal/freeport"
	"github.com/drover-dev/drover/persistence/stores"
)

// TestIdleHeapProfile is a harness, not a test: with DROVER_IDLE_PROFILE
// set to a file name it runs the idle node of `drover bench --idle` in
// this process (DROVER_IDLE_UNITS units, default 10,000, SQLite), waits
// until every unit opened and then DROVER_IDLE_SETTLE (default 10 s) more,
// and writes a heap profile there after a GC:
//
//	DROVER_IDLE_PROFILE=/tmp/idle.heap go test ./cluster/bench -run TestIdleHeapProfile -timeout 10m
//	go tool pprof -top -inuse_space /tmp/idle.heap
func TestIdleHeapProfile(t *testing.T) {
	out := os.Getenv("DROVER_IDLE_PROFILE")
	if out == "" {
		t.Skip("a measuring harness: set DROVER_IDLE_PROFILE to a file to write the heap profile of an idle node")
	}
	units, settle := 10000, 10*time.Second
	if v := os.Getenv("DROVER_IDLE_UNITS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("DROVER_IDLE_UNITS=%q: a positive number of units", v)
		}
		units = n
	}
	if v := os.Getenv("DROVER_IDLE_SETTLE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("DROVER_IDLE_SETTLE=%q: %v", v, err)
		}
		settle = d
	}
	dir := t.TempDir()
	storeURL := "sqlite:" + filepath.Join(dir, "idle.db")
	t.Setenv(storeEnv, storeURL)
	ports, err := freeport.Take(1)
	if err != nil {
		t.Fatal(err)
	}
	yaml, names, sizes := idleConfig("idle-profile", ports[0], units)
	path := filepath.Join(dir, "idle.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	n, err := node.Start(ctx, cfg, node.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		_ = n.Shutdown(sctx)
	}()
	st, err := stores.Open(ctx, storeURL, stores.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	deadline := time.Now().Add(2*time.Minute + time.Duration(units)*20*time.Millisecond)
	for opened := 0; opened < units; {
		opened = 0
		for i, src := range names {
			if cps, err := st.Checkpoints(ctx, src); err == nil {
				opened += min(len(cps), sizes[i])
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d units opened in time", opened, units)
		}
		time.Sleep(100 * time.Millisecond) // polling a condition with a deadline
	}
	time.Sleep(settle) // the idle state is what is measured
	runtime.GC()
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		t.Fatal(err)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("%d units: heap in use %.1f MB (%.1f KB per unit), %d goroutines; profile in %s",
		units, float64(ms.HeapInuse)/(1<<20), float64(ms.HeapInuse)/1024/float64(units), runtime.NumGoroutine(), out)
}
