package demo

import (
	"context"
	"database/sql"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// SIGTERM starts a graceful stop; a second signal ends the process at once
// even while the stop waits for a batch in flight.
func TestSecondSignalExitsAtOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	c := startConverged(t, ctx, Config{Dir: dir, Nodes: 1, Partitions: 2})
	defer c.Close()
	n := c.Nodes()[0]
	prod, err := c.NewProducer(3)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if err := prod.Produce(ctx, 50); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the first messages applied", func() bool { return applied(c, ctx) > 0 })

	// hold SQLite's write lock: the node's next applies wait on it
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "drover.db")+"?_pragma=busy_timeout(10000)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`UPDATE drover_leases SET owner = owner WHERE 0`); err != nil {
		t.Fatal(err)
	}
	if err := prod.Produce(ctx, 200); err != nil {
		t.Fatal(err)
	}

	pid := n.Pid()
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the node to start leaving", func() bool { return logContains(n.LogPath, "leaving gracefully") })
	if !n.Running() {
		t.Fatal("the node finished its graceful stop although its store was locked: the test shows nothing")
	}
	second := time.Now()
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the process to end", func() bool { return !n.Running() })
	took := time.Since(second)
	t.Logf("exited %s after the second signal", took)
	if took > 3*time.Second {
		t.Errorf("the second signal took %s to end the process", took)
	}
	if n.ExitError() == nil || !logContains(n.LogPath, "second signal") {
		t.Errorf("exit %v; the log should say the second signal ended it", n.ExitError())
	}
}
