package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/drover-dev/drover/internal/clock"
	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/persistence/sqlite"
	"github.com/drover-dev/drover/persistence/storetest"
	"github.com/drover-dev/drover/testkit"
)

func open(t *testing.T, path string, clk clock.Clock) *sqlite.Store {
	t.Helper()
	return openConfig(t, path, sqlite.Config{Clock: clk})
}

// openConfig opens the store at path with cfg, closed when t ends.
func openConfig(t *testing.T, path string, cfg sqlite.Config) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), path, cfg)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// rawDB opens the store's file directly, to read or stamp the schema.
func rawDB(t *testing.T, s persistence.Store) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+s.(*sqlite.Store).Path()+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func TestConformance(t *testing.T) {
	clocks := map[persistence.Store]clock.Clock{}
	storetest.Run(t, storetest.Harness{
		Clock: true,
		Open: func(t *testing.T, clk clock.Clock) persistence.Store {
			s := open(t, filepath.Join(t.TempDir(), "drover.db"), clk)
			clocks[s] = clk
			return s
		},
		FailMidTx: func(t *testing.T, s persistence.Store) {
			sqlite.FailAfterWrites(s.(*sqlite.Store), 3)
		},
		Refuse: refuseBad,
		Schema: &storetest.Schema{
			Version: sqlite.SchemaVersion(),
			Reopen: func(t *testing.T, s persistence.Store) (persistence.Store, error) {
				return sqlite.Open(context.Background(), s.(*sqlite.Store).Path(), sqlite.Config{Clock: clocks[s]})
			},
			Current: func(t *testing.T, s persistence.Store) int {
				var v int
				if err := rawDB(t, s).QueryRow(`SELECT version FROM drover_schema`).Scan(&v); err != nil {
					t.Fatalf("read schema version: %v", err)
				}
				return v
			},
			Stamp: func(t *testing.T, s persistence.Store, v int) {
				if _, err := rawDB(t, s).Exec(`UPDATE drover_schema SET version = ?`, v); err != nil {
					t.Fatalf("stamp schema version: %v", err)
				}
			},
		},
	})
}

// refuseBad makes the records table refuse documents with a member "bad".
// SQLite cannot add a CHECK constraint to a table that exists: triggers
// raise the same SQLITE_CONSTRAINT error for inserts and updates.
func refuseBad(t *testing.T, s persistence.Store, table string) {
	t.Helper()
	for _, when := range []string{"INSERT", "UPDATE"} {
		q := `CREATE TRIGGER "refuse_bad_` + when + `" BEFORE ` + when + ` ON "` + table + `"
WHEN NEW.doc->>'bad' IS NOT NULL
BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: doc->>''bad'' IS NULL'); END`
		if _, err := rawDB(t, s).Exec(q); err != nil {
			t.Fatalf("refuse documents with a member bad in %s: %v", table, err)
		}
	}
}

// Issue 10 item 7, on SQLite: a records table whose doc column has a CHECK
// constraint; the records of a batch that violate it are dead-lettered with
// SQLite's message, alone, the rest of the batch applied, the checkpoint
// at the last message. In handler mode a Put the constraint refuses,
// returned by the handler, is handled the same way.
func TestRefusedRecordsDeadLettered(t *testing.T) {
	storetest.RunRefused(t, storetest.Refusal{
		Seed:    51,
		Backlog: true,
		Store: func(t *testing.T) (func(*testkit.Clock) (persistence.Store, error), func(*testing.T, *testkit.Cluster)) {
			path := filepath.Join(t.TempDir(), "drover.db")
			db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			// The records table as drover makes it, with the constraint: the
			// store's CREATE TABLE IF NOT EXISTS keeps it.
			if _, err := db.Exec(`CREATE TABLE "orders" (
	key        TEXT    PRIMARY KEY,
	doc        TEXT    NOT NULL CHECK (doc->>'bad' IS NULL),
	source     TEXT    NOT NULL,
	unit       TEXT    NOT NULL,
	position   TEXT    NOT NULL,
	updated_at INTEGER NOT NULL
) WITHOUT ROWID`); err != nil {
				t.Fatal(err)
			}
			return func(clk *testkit.Clock) (persistence.Store, error) {
				return sqlite.Open(context.Background(), path, sqlite.Config{Clock: clk})
			}, nil
		},
		Records: 27,
		Reason:  "CHECK constraint failed",
	})
}
