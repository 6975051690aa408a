package pgtest

import (
	"context"
	"errors"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

var pg = New()

func TestMain(m *testing.M) { os.Exit(Main(m, pg)) }

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func TestURLGivesEachTestItsOwnDatabase(t *testing.T) {
	ctx := context.Background()
	a, b := connect(t, pg.URL(t)), connect(t, pg.URL(t))
	var dbA, dbB string
	if err := a.QueryRow(ctx, "SELECT current_database()").Scan(&dbA); err != nil {
		t.Fatal(err)
	}
	if err := b.QueryRow(ctx, "SELECT current_database()").Scan(&dbB); err != nil {
		t.Fatal(err)
	}
	if dbA == dbB {
		t.Fatalf("both URLs name database %q", dbA)
	}
	if _, err := a.Exec(ctx, "CREATE TABLE only_in_a (x int)"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := b.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename = 'only_in_a'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("a table created in %s is visible in %s", dbA, dbB)
	}
}

func TestModeFollowsEnv(t *testing.T) {
	pg.URL(t)
	external := os.Getenv(EnvURL) != ""
	if pg.Throwaway() == external {
		t.Fatalf("Throwaway() = %v with %s=%q", pg.Throwaway(), EnvURL, os.Getenv(EnvURL))
	}
	if external {
		if err := pg.Stop(); !errors.Is(err, ErrExternal) {
			t.Fatalf("Stop of an external server: got %v, want ErrExternal", err)
		}
		if err := pg.Start(); !errors.Is(err, ErrExternal) {
			t.Fatalf("Start of an external server: got %v, want ErrExternal", err)
		}
	}
}

func TestStopStart(t *testing.T) {
	srv := NewLocal()
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Error(err)
		}
	})
	url := srv.URL(t)
	if !srv.Throwaway() {
		t.Fatal("NewLocal gave a server it cannot stop")
	}
	c := connect(t, url)
	ctx := context.Background()
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "SELECT 1"); err == nil {
		t.Fatal("a query succeeded while the server was stopped")
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if c2, err := pgx.Connect(cctx, url); err == nil {
		c2.Close(ctx)
		t.Fatal("connected while the server was stopped")
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	c3 := connect(t, url)
	var one int
	if err := c3.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("after Start: %d, %v", one, err)
	}
}

func TestWithDatabase(t *testing.T) {
	for _, tc := range []struct{ base, want, err string }{
		{"postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "postgres://postgres@127.0.0.1:5432/db1?sslmode=disable", ""},
		{"postgresql://u:p@h/", "postgresql://u:p@h/db1", ""},
		{"postgres://h:1", "postgres://h:1/db1", ""},
		{"mysql://h/x", "", `want a postgres:// URL, got scheme "mysql"`},
	} {
		got, err := withDatabase(tc.base, "db1")
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("withDatabase(%q): err %v, want %q", tc.base, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("withDatabase(%q) = %q, %v; want %q", tc.base, got, err, tc.want)
		}
	}
}

// fakeTB records a skip or a failure and ends the goroutine as testing does.
type fakeTB struct {
	testing.TB
	mu              sync.Mutex
	skipped, failed string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Skipf(format string, args ...any) {
	f.mu.Lock()
	f.skipped = format
	f.mu.Unlock()
	runtime.Goexit()
}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.failed = format
	f.mu.Unlock()
	runtime.Goexit()
}

func TestNoServerSkipsOrFailsUnderCI(t *testing.T) {
	t.Setenv(EnvURL, "")
	t.Setenv(EnvBin, t.TempDir()) // a directory without initdb
	for _, ci := range []string{"", "true"} {
		t.Setenv("CI", ci)
		s := New()
		f := &fakeTB{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.URL(f)
		}()
		<-done
		f.mu.Lock()
		skipped, failed := f.skipped, f.failed
		f.mu.Unlock()
		if ci == "true" && (failed == "" || skipped != "") {
			t.Errorf("CI=true: skipped %q, failed %q; want a failure", skipped, failed)
		}
		if ci == "" && (skipped == "" || failed != "") {
			t.Errorf("CI unset: skipped %q, failed %q; want a skip", skipped, failed)
		}
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}
}
