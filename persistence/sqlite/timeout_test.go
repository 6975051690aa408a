package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/persistence/sqlite"
)

// within runs f and fails the test when it has not returned after limit:
// f hangs. f's context has no deadline; it is cancelled only then.
func within(t *testing.T, limit time.Duration, what string, f func(ctx context.Context) error) (time.Duration, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- f(ctx) }()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case err := <-done:
		return time.Since(start), err
	case <-timer.C:
		cancel()
		<-done
		t.Fatalf("%s: still waiting after %s: it hangs", what, limit)
	}
	return 0, nil
}

// Every call honours Config.Timeout even when its context has no deadline:
// a batch whose handler hangs holds the store's one connection only until
// its own deadline, and a wait for another connection's write lock ends
// at busy_timeout, which is the store timeout.
func TestCallsHaveADeadline(t *testing.T) {
	const timeout = 300 * time.Millisecond
	path := filepath.Join(t.TempDir(), "deadline.db")
	// migrated first with the default timeout: the calls are under test,
	// not a fresh file's seven migrations, which a loaded machine (CI
	// under -race) takes longer than 300 ms for
	m, err := sqlite.Open(t.Context(), path, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := sqlite.Open(t.Context(), path, sqlite.Config{Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l, err := s.Acquire(t.Context(), persistence.AcquireRequest{Unit: "jobs/slot-0", Owner: "node-1", TTL: time.Hour, Live: []string{"node-1"}})
	if err != nil {
		t.Fatal(err)
	}

	// A handler that ignores its context holds the one connection.
	inside, release := make(chan context.Context, 1), make(chan struct{})
	applied := make(chan error, 1)
	go func() {
		_, err := s.Apply(context.Background(), &persistence.Batch{Source: "jobs", Unit: l.Unit, Lease: l,
			Ops: []persistence.Op{{Kind: persistence.OpMessage, Position: "1"}},
			Handle: func(ctx context.Context, _ persistence.Tx, _ []persistence.Op) error {
				inside <- ctx
				<-release
				return nil
			}})
		applied <- err
	}()
	batchCtx := <-inside
	// The batch's own deadline ends its transaction (database/sql rolls it
	// back and frees the connection, whatever the handler does), so a call
	// behind it either gets the connection then or meets its own deadline:
	// it never waits for the handler.
	took, err := within(t, 20*timeout, "List while a hung handler holds the connection", func(ctx context.Context) error {
		_, err := s.List(ctx)
		return err
	})
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("List behind a hung handler: %v after %s, want a result or the store's deadline", err, took)
	}
	t.Logf("List behind a hung handler: %v after %s", err, took)
	// The handler returns only once its batch's deadline has passed.
	if _, err := within(t, 20*timeout, "the batch's deadline", func(context.Context) error {
		<-batchCtx.Done()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-applied; err == nil {
		t.Error("a batch whose handler outlived the store timeout committed")
	}

	// Another connection (another process, as far as SQLite can tell)
	// holds the write lock: busy_timeout is the store timeout.
	other, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	took, err = within(t, 20*timeout, "Acquire while another connection holds the write lock", func(ctx context.Context) error {
		_, err := s.Acquire(ctx, persistence.AcquireRequest{Unit: "orders/1", Owner: "node-1", TTL: time.Hour})
		return err
	})
	if err == nil {
		t.Fatal("Acquire succeeded while another connection held the write lock")
	}
	t.Logf("Acquire while the write lock is held elsewhere: %v after %s", err, took)
	if _, err := conn.ExecContext(t.Context(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(t.Context(), persistence.AcquireRequest{Unit: "orders/1", Owner: "node-1", TTL: time.Hour}); err != nil {
		t.Errorf("Acquire once the lock is free: %v", err)
	}
}

func TestOpenRejectsShortTimeout(t *testing.T) {
	_, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "x.db"), sqlite.Config{Timeout: time.Millisecond})
	if err == nil {
		t.Fatal("a 1ms timeout: no error")
	}
}

// PruneDedupe deletes a backlog larger than one chunk (10,000 rows) and
// keeps what is newer than its cutoff.
func TestPruneDedupeInChunks(t *testing.T) {
	// the chunking is under test, not the deadline: a chunk of 10,000
	// deletes under -race on a loaded machine took longer than the default
	s := openConfig(t, filepath.Join(t.TempDir(), "prune.db"), sqlite.Config{Timeout: 2 * time.Minute})
	const old = 25_000
	now := time.Now()
	if _, err := rawDB(t, s).Exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
		INSERT INTO drover_dedupe (source, message_id, applied_at)
		SELECT 'jobs', 'old-' || i, ? FROM n
		UNION ALL SELECT 'jobs', 'new-' || i, ? FROM n WHERE i <= 5`,
		old, now.Add(-240*time.Hour).UnixNano(), now.UnixNano()); err != nil {
		t.Fatal(err)
	}
	n, err := s.PruneDedupe(t.Context(), now.Add(-24*time.Hour))
	if err != nil || n != old {
		t.Fatalf("pruned %d, %v; want %d", n, err, old)
	}
	var left int
	if err := rawDB(t, s).QueryRow(`SELECT count(*) FROM drover_dedupe`).Scan(&left); err != nil || left != 5 {
		t.Errorf("%d rows left, %v; want the 5 new ones", left, err)
	}
}
