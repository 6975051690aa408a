package sqlite_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/persistence/sqlite"
)

// Environment of a child process of TestColdStartThreeProcesses.
const (
	coldChildEnv  = "DROVER_SQLITE_COLD_CHILD"
	coldPathEnv   = "DROVER_SQLITE_COLD_PATH"
	coldRoundsEnv = "DROVER_SQLITE_COLD_ROUNDS" // overrides coldRounds
)

const (
	coldRounds = 50
	coldProcs  = 3
)

// TestColdStartThreeProcesses is issue 9 item 14: three node processes
// started together on a fresh SQLite file must all come up, however their
// opens (the switch to WAL, the first migration) interleave. Each round
// starts three processes (this test binary again) on a new file; each
// opens the store, migrates it and acquires one lease, released at once,
// then exits. The processes wait at a barrier until all three are running,
// so that their opens race. Every process of every round must succeed.
func TestColdStartThreeProcesses(t *testing.T) {
	if name := os.Getenv(coldChildEnv); name != "" {
		coldChild(name)
		return
	}
	rounds := coldRounds
	if v := os.Getenv(coldRoundsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("%s=%q: want a positive integer", coldRoundsEnv, v)
		}
		rounds = n
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	dir := t.TempDir()
	failedRounds := 0
	var failures []string
	for r := range rounds {
		path := filepath.Join(dir, fmt.Sprintf("cold-%03d.db", r))
		errs := coldRound(ctx, t, path)
		if len(errs) > 0 {
			failedRounds++
			failures = append(failures, fmt.Sprintf("round %d: %s", r, strings.Join(errs, "; ")))
		}
	}
	t.Logf("%d rounds of %d processes on a fresh file: %d rounds with a failed process", rounds, coldProcs, failedRounds)
	for _, f := range failures {
		t.Error(f)
	}
}

// coldRound runs one round and returns what failed.
func coldRound(ctx context.Context, t *testing.T, path string) []string {
	t.Helper()
	var children []*child
	for i := range coldProcs {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestColdStartThreeProcesses$", "-test.count=1")
		// Under -race each child would sleep a second at exit
		// (atexit_sleep_ms), 150 seconds in all; it reports races without it.
		cmd.Env = append(os.Environ(), coldChildEnv+"="+fmt.Sprintf("proc-%d", i), coldPathEnv+"="+path,
			"GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
		children = append(children, startChild(t, "", cmd, 0))
	}
	var errs []string
	// The barrier: every child is running and waiting before any opens.
	for i, c := range children {
		if !waitLine(c.lines, "ready") {
			errs = append(errs, fmt.Sprintf("proc-%d did not start: %s", i, c.stderr.String()))
		}
	}
	for _, c := range children {
		_, _ = io.WriteString(c.stdin, "go\n")
		_ = c.stdin.Close()
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i, c := range children {
		wg.Go(func() {
			ok := waitLine(c.lines, "ok")
			for c.lines.Scan() {
			}
			err := c.cmd.Wait()
			if !ok || err != nil {
				mu.Lock()
				errs = append(errs, fmt.Sprintf("proc-%d: %v: %s", i, err, strings.TrimSpace(c.stderr.String())))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errs
}

// coldChild is the body of one child: open, acquire, release, exit. A
// failure is printed to stderr and exits 1.
func coldChild(name string) {
	fail := func(err error) {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
	if _, err := fmt.Println("ready"); err != nil {
		fail(err)
	}
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fail(fmt.Errorf("barrier: %w", err))
	}
	ctx := context.Background()
	s, err := sqlite.Open(ctx, os.Getenv(coldPathEnv), sqlite.Config{})
	if err != nil {
		fail(err)
	}
	l, err := s.Acquire(ctx, persistence.AcquireRequest{Unit: "cold/" + name, Owner: name, TTL: time.Minute, Live: []string{name}})
	if err != nil && !errors.Is(err, persistence.ErrLeaseHeld) {
		fail(err)
	}
	if err == nil {
		if err := s.Release(ctx, l); err != nil {
			fail(err)
		}
	}
	if err := s.Close(); err != nil {
		fail(err)
	}
	fmt.Println("ok")
	os.Exit(0)
}
