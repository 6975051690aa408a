package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/persistence/sqlite"
)

// leased opens a store on a fresh file in tb's temporary directory
// (closed when tb ends) and takes an hour's lease of each unit for
// node-1; path is the database file.
func leased(tb testing.TB, units ...string) (s *sqlite.Store, ls []persistence.Lease, path string) {
	tb.Helper()
	ctx := context.Background()
	path = filepath.Join(tb.TempDir(), "drover.db")
	s, err := sqlite.Open(ctx, path, sqlite.Config{})
	if err != nil {
		tb.Fatalf("open %s: %v", path, err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	for _, u := range units {
		l, err := s.Acquire(ctx, persistence.AcquireRequest{Unit: u, Owner: "node-1", TTL: time.Hour, Live: []string{"node-1"}})
		if err != nil {
			tb.Fatal(err)
		}
		ls = append(ls, l)
	}
	return s, ls, path
}

// waitFileGrows waits until the file at path is at least want bytes, for
// at most 10 s; why says what a file that did not grow means.
func waitFileGrows(t *testing.T, path string, want int64, why string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() >= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("database file still %d bytes 10 s later, want %d: %s", fi.Size(), want, why)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition with a deadline
	}
}

// benchUnits are the units bench/0 … bench/n-1.
func benchUnits(n int) []string {
	us := make([]string, n)
	for i := range us {
		us[i] = "bench/" + strconv.Itoa(i)
	}
	return us
}
