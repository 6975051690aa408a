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
)

func open(t *testing.T, path string, clk clock.Clock) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), path, sqlite.Config{Clock: clk})
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
