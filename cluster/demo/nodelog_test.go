package demo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/syncbuf"
)

// A node process that exits by itself is reported with the end of its
// log, and a signal to it afterwards says how it ended and what its log
// says, so that a test that fails on it is diagnosable after t.TempDir is
// gone (TestThreeNodesWithPostgres once failed with only "signal node-3:
// os: process already finished").
func TestUnexpectedExitReportsTheLog(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "fake-drover")
	script := "#!/bin/sh\necho 'drover: cluster: bind: address already in use' >&2\nexit 1\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	var log syncbuf.Buffer
	c, err := Start(Config{Dir: filepath.Join(dir, "demo"), Binary: fake, Nodes: 1, Partitions: 1, Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	n := c.Nodes()[0]
	if err := c.StartNode(n); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for n.Running() {
		if time.Now().After(deadline) {
			t.Fatal("the fake node did not exit")
		}
		time.Sleep(10 * time.Millisecond) // polling a condition with a deadline
	}
	want := "node-1 (pid "
	if s := log.String(); !strings.Contains(s, want) || !strings.Contains(s, "exited without being stopped by the demo: exit status 1") ||
		!strings.Contains(s, "address already in use") {
		t.Errorf("progress log %q: want the unexpected exit with its status and the end of the node's log", s)
	}
	err = c.Kill(n)
	if err == nil || !strings.Contains(err.Error(), "it had exited by itself (exit status 1)") || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("Kill of the exited node: %v; want how it ended and the end of its log", err)
	}
}
