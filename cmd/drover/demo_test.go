package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --chaos refuses, with exit 2 and before starting anything, what it
// cannot do.
func TestDemoChaosRefusesWhatItCannotDo(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--chaos", "1m", "--store", "sqlite:" + dir + "/x.db"}, "needs a networked store"},
		{[]string{"--chaos", "1m", "--duration", "10s"}, "drop --duration"},
		{[]string{"--chaos", "1m", "--kill", "node-2@3s"}, "drop --kill"},
		{[]string{"--chaos", "-1s"}, "must be positive"},
	} {
		code, _, errs := runCLI(t, append([]string{"demo", "--dir", dir}, tc.args...)...)
		if code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("demo %v: exit %d, stderr %q; want exit 2 and %q", tc.args, code, errs, tc.want)
		}
	}
}

// --chaos reads the store's scheme as the store opener does, in any case:
// POSTGRES:// is the networked store it needs, not a refusal.
func TestChaosStoreSchemeInAnyCase(t *testing.T) {
	for url, want := range map[string]bool{
		"postgres://u@db:5432/x":   true,
		"POSTGRES://u@db:5432/x":   true,
		"PostgreSQL://u@db:5432/x": true,
		"sqlite:./x.db":            false,
		"memory:":                  false,
		"postgres:x":               false, // no host: not a store at all
	} {
		if got := networkedStore(url); got != want {
			t.Errorf("networkedStore(%q) = %v, want %v", url, got, want)
		}
	}
}

// Issue 10, item 9: `drover demo --dir X` deleted X/drover.db*, its
// node-*.yaml and node-*.log before validating anything. A directory that
// is not empty and not a previous demo's is refused with exit 2, and its
// files stay.
func TestDemoRefusesADirectoryThatIsNotADemos(t *testing.T) {
	dir := t.TempDir()
	files := []string{"drover.db", "drover.db-wal", "node-1.yaml", "node-1.log", "notes.txt"}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("mine"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, _, errs := runCLI(t, "demo", "--dir", dir, "--duration", "1s")
	if code != 2 || !strings.Contains(errs, dir) || !strings.Contains(errs, "not a previous demo's") {
		t.Fatalf("exit %d, stderr %q; want 2 naming %s", code, errs, dir)
	}
	for _, f := range files {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// A bad --store URL is bad usage (exit 2), found before the directory is
// touched.
func TestDemoBadStoreURLExitsTwo(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	code, _, errs := runCLI(t, "demo", "--dir", dir, "--store", "mysql://h/db", "--duration", "1s")
	if code != 2 || !strings.Contains(errs, "--store") {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Error("the directory was created although the store URL is bad")
	}
}
