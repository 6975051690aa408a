package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
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
// backstop (walBackstopPages), and a goroutine of the Store runs PASSIVE
// checkpoints on a connection of its own: a round checkpointAfter after
// the round before while the Store's batches commit (each commit of a
// batch or group asks for one), every checkpointEvery otherwise (the
// Store's other writes, another process's). A PASSIVE checkpoint takes no
// write lock: commits go on beside it.
//
// Why rounds follow commits that closely: a checkpoint first syncs the
// WAL, and SQLite writes a whole page to the WAL for each row it changes
// (keys spread over the table share few pages), so every round syncs all
// the WAL written since the round before, and copies and syncs the pages.
// Every 200 ms under steady commits that was 10-30 MB at once, the disk
// busy for 10-25 ms each time; transactions slowed beside it, a queue of
// batches built, and that was most of the latency's tail at half load
// (traced per transaction: the slow ones came with the long rounds). Every
// 10 ms a round syncs a twentieth of it; a page changed by several commits
// between two rounds is copied once either way. Idle, no commit asks.
//
// Copying is not enough: the WAL starts over from its first frame only
// when a writer begins a transaction while every frame is copied (and no
// reader still reads from the WAL). Under a steady stream of commits a
// background checkpoint never copies the last frames, those committed
// while it copied, so the WAL grew until the writer's backstop: a commit
// that then synced 64 MiB of WAL and copied the rest, 30-100 ms during
// which every unit of the node waited (most of the latency's tail at half
// load, once a second or two). So a round copies again while a pass
// found more than walCatchUpFrames frames committed since the pass before
// (commits go on meanwhile; each pass has less to copy), and once the WAL
// holds walRestartFrames or more, it has the writer's own connection copy
// the few frames left, between two of the writer's transactions: the
// writer's next transaction then starts the WAL over, and the file is
// written again from its start instead of growing (restarts). The writer
// waits for that copy and its two syncs, not for 64 MiB: the frames since
// the round's last pass and those committed while the checkpointer
// waited for the writer's connection (2-4 ms on a quiet disk, more when
// the connection is busy or the disk is). A store whose WAL holds nothing
// new since the writer's last copy is not asked again.
//
// The backstop stays: the WAL cannot grow past it when the checkpointer
// falls behind or fails, or when a reader keeps the WAL from starting
// over.
const (
	checkpointEvery  = 200 * time.Millisecond // a round when no commit asks
	checkpointAfter  = 10 * time.Millisecond  // at least between two rounds
	walBackstopPages = 16384                  // 64 MiB of 4 KiB pages
	walRestartFrames = 4096                   // 16 MiB: the writer finishes the copy past this
	walCatchUpFrames = 64                     // a round copies again while more are left
	maxCatchUpPasses = 16                     // passes of one round at most
)

// checkpointer runs PASSIVE WAL checkpoints on its own connection until
// stopped.
type checkpointer struct {
	db      *sql.DB // the checkpointer's own connection
	writer  *sql.DB // the Store's: it finishes the copy before a restart
	log     *slog.Logger
	timeout time.Duration
	ctx     context.Context // ended by close: a checkpoint waiting for the writer gives up
	cancel  context.CancelFunc
	every   time.Duration // checkpointEvery, but for tests
	asked   chan struct{} // a commit asks for a round (buffered 1)
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
	err     error // of the connection's Close
	failing bool  // the last checkpoint failed (run's goroutine only)

	// run's goroutine only: the WAL's frames at the last pass, to see it
	// start over, and when the writer last copied the rest (no second
	// copy while nothing was committed since)
	lastLog, caughtUp int
	// restarts counts the rounds that found the WAL started over since
	// the round before (for tests)
	restarts atomic.Int64
}

// checkpointIdle is checkpointEvery for the checkpointers started next
// (a test sets it longer, to see that commits start rounds without it).
var checkpointIdle atomic.Int64

func init() { checkpointIdle.Store(int64(checkpointEvery)) }

// startCheckpointer opens the checkpointer's connection to path (which
// must exist: Open made it) and starts its goroutine; writer is the
// Store's own connection.
func startCheckpointer(ctx context.Context, path string, timeout time.Duration, log *slog.Logger, writer *sql.DB) (*checkpointer, error) {
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
	c := &checkpointer{db: db, writer: writer, log: log, timeout: timeout, every: time.Duration(checkpointIdle.Load()),
		asked: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	go c.run()
	return c, nil
}

// committed asks for a round: the Store's batches committed. It never
// waits; asks before the round starts make one round. c may be nil (a
// read-only Store's).
func (c *checkpointer) committed() {
	if c == nil {
		return
	}
	select {
	case c.asked <- struct{}{}:
	default:
	}
}

// run starts a round when a commit asks or c.every after the last one
// ended, and never sooner than checkpointAfter after the last one began.
func (c *checkpointer) run() {
	defer close(c.done)
	idle := time.NewTimer(c.every)
	defer idle.Stop()
	gap := time.NewTimer(checkpointAfter)
	gap.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-idle.C:
		case <-c.asked:
		}
		began := time.Now()
		c.report(c.round())
		idle.Reset(c.every)
		gap.Reset(checkpointAfter - time.Since(began))
		select {
		case <-c.stop:
			return
		case <-gap.C:
		}
	}
}

// report logs a checkpoint's outcome: a warning when checkpoints start to
// fail (the writer's backstop keeps the WAL bounded meanwhile, and the
// next round tries again), the failures after it at debug level only (up
// to one every checkpointAfter), and a note when one succeeds again.
func (c *checkpointer) report(err error) {
	switch {
	case err != nil && !c.failing:
		c.failing = true
		c.log.Warn("sqlite wal checkpoint failed; retried at the next commit or within "+c.every.String()+", the writer checkpoints past "+
			"its backstop meanwhile", "err", err)
	case err != nil:
		c.log.Debug("sqlite wal checkpoint", "err", err)
	case c.failing:
		c.failing = false
		c.log.Info("sqlite wal checkpoint works again")
	}
}

// walState is what PRAGMA wal_checkpoint answers: whether it was kept
// from finishing (busy), the frames in the WAL when it began and those
// copied (all of them unless a reader still reads older ones).
type walState struct {
	busy        bool
	log, copied int
}

// left is how many frames the checkpoint could not copy.
func (w walState) left() int { return w.log - w.copied }

// round copies what the WAL holds into the database file, as far as
// readers allow, without waiting for any lock. A checkpoint copies the
// frames committed when it began; those committed while it copied are
// left for the next. So a round copies again, while a pass found more
// than walCatchUpFrames new frames since the one before (each pass is
// shorter than the last), and past walRestartFrames has the writer's
// connection copy the few left, so that the WAL starts over.
func (c *checkpointer) round() error {
	w, err := c.checkpoint(c.db)
	if err != nil {
		return err
	}
	if w.log >= 0 && w.log < c.lastLog {
		c.restarts.Add(1) // started over since the last round
	}
	c.lastLog = w.log
	converged := false
	for pass := 1; pass < maxCatchUpPasses && !w.busy && w.log >= 0 && w.left() == 0; pass++ {
		prev := w
		if w, err = c.checkpoint(c.db); err != nil {
			return err
		}
		if w.log-prev.log <= walCatchUpFrames {
			converged = w.log >= prev.log // not started over meanwhile
			break
		}
	}
	if !converged || w.busy || w.left() != 0 || w.log < walRestartFrames || w.log == c.caughtUp {
		return nil
	}
	c.caughtUp = w.log
	if _, err = c.checkpoint(c.writer); err != nil && c.ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	// A writer's connection busy for the whole timeout (a long handler)
	// or a close is no failure: the next round tries again.
	return nil
}

// checkpoint runs a PASSIVE checkpoint on db.
func (c *checkpointer) checkpoint(db *sql.DB) (walState, error) {
	ctx, cancel := context.WithTimeout(c.ctx, c.timeout)
	defer cancel()
	var w walState
	var busy int
	if err := db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &w.log, &w.copied); err != nil {
		return w, dbErr(err)
	}
	w.busy = busy != 0
	return w, nil
}

// close stops the goroutine, waits for it and closes the connection. It
// may be called again.
func (c *checkpointer) close() error {
	c.once.Do(func() {
		c.cancel()
		close(c.stop)
		<-c.done
		c.err = c.db.Close()
	})
	return c.err
}
