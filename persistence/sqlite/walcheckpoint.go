package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// WAL checkpoints run off the commit path. By default SQLite checkpoints
// in the connection that commits, once the WAL holds 1,000 pages: that
// commit then also copies every page of the WAL into the database file
// and fsyncs it, so the batches of that commit wait for it. A group
// commit of 12 batches of 500 changed rows writes thousands of pages, so
// nearly every group paid a checkpoint.
//
// Instead a writing Store's connection checkpoints itself only as a
// backstop (walBackstopPages), and a goroutine of the Store runs a
// PASSIVE checkpoint on a connection of its own every checkpointEvery. A
// PASSIVE checkpoint takes no write lock: commits go on beside it, and a
// page written by several commits since the last checkpoint is copied
// once. The WAL stays bounded even when the checkpointer falls behind or
// fails: at walBackstopPages the committing connection checkpoints what is
// left, which SQLite's restart of the WAL needs anyway under a steady
// stream of commits (a checkpoint that never catches up with the last
// commit lets the WAL grow).
const (
	checkpointEvery  = 200 * time.Millisecond
	walBackstopPages = 16384 // 64 MiB of 4 KiB pages
)

// checkpointer runs PASSIVE WAL checkpoints on its own connection until
// stopped.
type checkpointer struct {
	db      *sql.DB
	log     *slog.Logger
	timeout time.Duration
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
	err     error // of the connection's Close
	failing bool  // the last checkpoint failed (run's goroutine only)
}

// startCheckpointer opens the checkpointer's connection to path (which
// must exist: Open made it) and starts its goroutine.
func startCheckpointer(ctx context.Context, path string, timeout time.Duration, log *slog.Logger) (*checkpointer, error) {
	db, err := sql.Open("sqlite", fmt.Sprintf("file:%s?mode=rw&_pragma=busy_timeout(%d)", path, max(timeout.Milliseconds(), 1)))
	if err != nil {
		return nil, dbErr(err)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("connect checkpointer: %w", dbErr(err))
	}
	c := &checkpointer{db: db, log: log, timeout: timeout, stop: make(chan struct{}), done: make(chan struct{})}
	go c.run()
	return c, nil
}

func (c *checkpointer) run() {
	defer close(c.done)
	t := time.NewTicker(checkpointEvery)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		c.report(c.checkpoint())
	}
}

// report logs a checkpoint's outcome: a warning when checkpoints start to
// fail (the writer's backstop keeps the WAL bounded meanwhile, and the
// next tick tries again), the failures after it at debug level only (one
// every checkpointEvery), and a note when one succeeds again.
func (c *checkpointer) report(err error) {
	switch {
	case err != nil && !c.failing:
		c.failing = true
		c.log.Warn("sqlite wal checkpoint failed; retried every "+checkpointEvery.String()+", the writer checkpoints past "+
			"its backstop meanwhile", "err", err)
	case err != nil:
		c.log.Debug("sqlite wal checkpoint", "err", err)
	case c.failing:
		c.failing = false
		c.log.Info("sqlite wal checkpoint works again")
	}
}

// checkpoint copies what the WAL holds into the database file, as far as
// readers allow, without waiting for any lock.
func (c *checkpointer) checkpoint() error {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	if _, err := c.db.ExecContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)"); err != nil {
		return dbErr(err)
	}
	return nil
}

// close stops the goroutine, waits for it and closes the connection. It
// may be called again.
func (c *checkpointer) close() error {
	c.once.Do(func() {
		close(c.stop)
		<-c.done
		c.err = c.db.Close()
	})
	return c.err
}
