package demo

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 10, item 9: `drover demo --dir X` deleted X/drover.db* and X/nats
// whatever X was. A directory is the demo's only when it is new, empty or
// marked by a previous demo.
func TestClaimDir(t *testing.T) {
	base := t.TempDir()
	marked := func(dir string) bool {
		_, err := os.Stat(filepath.Join(dir, Marker))
		return err == nil
	}

	fresh := filepath.Join(base, "new", "demo")
	if err := ClaimDir(fresh); err != nil || !marked(fresh) {
		t.Fatalf("a new directory: %v (marked %v)", err, marked(fresh))
	}
	if err := ClaimDir(fresh); err != nil {
		t.Fatalf("a previous demo's directory: %v", err)
	}
	// a previous demo's directory with its files is still the demo's
	for _, f := range []string{"drover.db", "node-1.yaml"} {
		if err := os.WriteFile(filepath.Join(fresh, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := ClaimDir(fresh); err != nil {
		t.Fatalf("a previous demo's directory with its files: %v", err)
	}

	empty := filepath.Join(base, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := ClaimDir(empty); err != nil || !marked(empty) {
		t.Fatalf("an empty directory: %v", err)
	}

	other := filepath.Join(base, "home")
	if err := os.MkdirAll(filepath.Join(other, "nats"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"drover.db", "thesis.tex"} {
		if err := os.WriteFile(filepath.Join(other, f), []byte("mine"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	err := ClaimDir(other)
	if !errors.Is(err, ErrNotDemoDir) || !strings.Contains(err.Error(), other) || !strings.Contains(err.Error(), Marker) {
		t.Fatalf("a directory with other files: %v, want ErrNotDemoDir naming it", err)
	}
	if marked(other) {
		t.Error("the marker was written into a directory that was refused")
	}

	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := ClaimDir(file); err == nil {
		t.Error("a file was claimed as a directory")
	}
}

// Start refuses such a directory before it empties nats/ in it.
func TestStartRefusesAnotherDirectory(t *testing.T) {
	dir := t.TempDir()
	keep := filepath.Join(dir, "nats", "keep")
	if err := os.MkdirAll(filepath.Dir(keep), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keep, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Start(Config{Dir: dir, Binary: "/bin/true"})
	if err == nil {
		c.Close()
		t.Fatal("Start took a directory that is not a demo's")
	}
	if !errors.Is(err, ErrNotDemoDir) {
		t.Errorf("err = %v, want ErrNotDemoDir", err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("Start removed a file of a directory it refused: %v", err)
	}
}
