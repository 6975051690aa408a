package demo

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Marker is the file a demo writes into its directory. A directory that
// holds it is a previous demo's, whose files the next demo may replace.
const Marker = ".drover-demo"

// ErrNotDemoDir is returned by ClaimDir for a directory that is neither
// empty nor a previous demo's.
var ErrNotDemoDir = errors.New("not empty and not a previous demo's")

const markerText = `This directory belongs to drover demo. Each run replaces drover.db*,
node-*.yaml, node-*.log and nats/ here. drover demo refuses any other
directory that is not empty, so that it never deletes files it did not
write.
`

// ClaimDir makes dir the demo's directory before anything in it is
// removed: it creates dir when it does not exist, accepts it when it is
// empty or holds Marker, and otherwise fails with an error that wraps
// ErrNotDemoDir and names dir. It then writes Marker.
func ClaimDir(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("demo directory %s: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return fmt.Errorf("demo directory %s: %w", abs, err)
	}
	marker := filepath.Join(abs, Marker)
	switch _, err := os.Lstat(marker); {
	case err == nil:
		return nil
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("demo directory %s: %w", abs, err)
	}
	d, err := os.Open(abs)
	if err != nil {
		return fmt.Errorf("demo directory %s: %w", abs, err)
	}
	names, err := d.Readdirnames(1)
	_ = d.Close()
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("demo directory %s: %w", abs, err)
	}
	if len(names) > 0 {
		return fmt.Errorf("demo directory %s: %w (it has no %s file): the demo deletes drover.db*, node-*.yaml, node-*.log and nats/ in its directory; choose a new or empty one",
			abs, ErrNotDemoDir, Marker)
	}
	if err := os.WriteFile(marker, []byte(markerText), 0o644); err != nil {
		return fmt.Errorf("demo directory %s: %w", abs, err)
	}
	return nil
}
