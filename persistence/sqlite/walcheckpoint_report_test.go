package sqlite

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// A checkpointer that starts failing says so once at warning level (not
// at every tick, nor only at debug level, where an operator never sees
// it), and says when checkpoints work again.
func TestCheckpointerReportsFailuresOnce(t *testing.T) {
	var buf bytes.Buffer
	c := &checkpointer{log: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	busy := errors.New("database is locked")
	c.report(nil)
	c.report(busy)
	c.report(busy)
	c.report(busy)
	c.report(nil)
	c.report(nil)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[0], "database is locked") ||
		!strings.Contains(lines[1], "level=INFO") || !strings.Contains(lines[1], "works again") {
		t.Errorf("log:\n%s\nwant one warning with the error, then one note of recovery", buf.String())
	}
}
