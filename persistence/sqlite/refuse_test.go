package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/persistence/sqlite"
	"github.com/drover-dev/drover/persistence/storetest"
	"github.com/drover-dev/drover/testkit"
)

// Issue 10 item 7, on SQLite: a records table whose doc column has a CHECK
// constraint; the records of a batch that violate it are dead-lettered with
// SQLite's message, alone, the rest of the batch applied, the checkpoint
// at the last message. In handler mode a Put the constraint refuses,
// returned by the handler, is handled the same way.
func TestRefusedRecordsDeadLettered(t *testing.T) {
	storetest.RunRefused(t, storetest.Refusal{
		Seed: 51,
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
