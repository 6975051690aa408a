package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/drover-dev/drover/actors"
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
	for _, handler := range []bool{false, true} {
		name := map[bool]string{false: "records", true: "handler"}[handler]
		t.Run(name, func(t *testing.T) {
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
			c, err := testkit.New(testkit.Config{Seed: 51, Nodes: 1, Store: func(clk *testkit.Clock) (persistence.Store, error) {
				return sqlite.Open(context.Background(), path, sqlite.Config{Clock: clk})
			}})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			spec := actors.SourceSpec{Name: "orders", KeyField: "id", BatchSize: 100}
			if handler {
				spec = actors.SourceSpec{Name: "orders", BatchSize: 100, Handler: storetest.PutAll("orders")}
			}
			if _, err := c.AddStream(spec, 1); err != nil {
				t.Fatal(err)
			}
			bad := []int{3, 4, 20}
			pos, err := c.Publish("orders", "0", storetest.RefusedDocs(30, "k", bad...)...)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			if !c.Settle(time.Minute) {
				t.Fatalf("did not settle: %v", c.Report().Violations)
			}
			if r := c.Report(); r.Lost != 0 || r.Duplicated != 0 || len(r.Violations) != 0 {
				t.Fatalf("lost=%d duplicated=%d %v", r.Lost, r.Duplicated, r.Violations)
			}
			storetest.CheckRefused(t, c.Store(), "orders", pos, 27, bad, "CHECK constraint failed")
		})
	}
}
