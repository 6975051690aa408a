package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/persistence/sqlite"
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
				spec = actors.SourceSpec{Name: "orders", BatchSize: 100, Handler: putAll("orders")}
			}
			if _, err := c.AddStream(spec, 1); err != nil {
				t.Fatal(err)
			}
			bad := map[int]bool{3: true, 4: true, 20: true}
			pos, err := c.Publish("orders", "0", checked(30, bad)...)
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
			ctx := context.Background()
			recs, err := c.Store().Records(ctx, "orders", "", 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != 27 {
				t.Errorf("%d records, want the 27 the constraint lets through", len(recs))
			}
			for _, r := range recs {
				if strings.Contains(string(r.Doc), `"bad"`) {
					t.Errorf("record %s violates the constraint: %s", r.Key, r.Doc)
				}
			}
			dls, err := c.Store().DeadLetters(ctx, persistence.DeadLetterFilter{Source: "orders"})
			if err != nil {
				t.Fatal(err)
			}
			if len(dls) != 3 {
				t.Fatalf("%d dead letters, want 3: %+v", len(dls), dls)
			}
			for i, d := range dls {
				want := pos[[]int{3, 4, 20}[i]]
				if d.Position != want || !strings.HasPrefix(d.Reason, "refused by the store: ") ||
					!strings.Contains(d.Reason, "CHECK constraint failed") || !strings.Contains(string(d.Payload), `"bad":true`) {
					t.Errorf("dead letter at %s (want %s): reason %q payload %s; want SQLite's message and the body", d.Position, want, d.Reason, d.Payload)
				}
			}
			cp, err := c.Store().Checkpoint(ctx, "orders/0")
			if err != nil || cp.Position != pos[29] {
				t.Errorf("checkpoint %q (%v), want %s", cp.Position, err, pos[29])
			}
		})
	}
}

// checked makes n upserts keyed by id; those in bad carry "bad": true.
func checked(n int, bad map[int]bool) []brokers.Message {
	out := make([]brokers.Message, n)
	for i := range out {
		extra := ""
		if bad[i] {
			extra = `,"bad":true`
		}
		out[i] = brokers.Message{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, `{"id":"k%d","n":%d%s}`, i, i, extra)}
	}
	return out
}

// putAll is a handler that writes every message's body under its key.
func putAll(table string) actors.Handler {
	return func(ctx context.Context, tx persistence.Tx, b actors.Batch) error {
		for _, m := range b.Messages {
			if err := tx.Put(ctx, table, string(m.Key), m.Value); err != nil {
				return fmt.Errorf("write %s: %w", m.Key, err)
			}
		}
		return nil
	}
}
