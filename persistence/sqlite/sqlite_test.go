package sqlite_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	msqlite "modernc.org/sqlite"

	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/persistence/sqlite"
)

func TestDriverErrorsDoNotLeak(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "drover.db"), nil)
	l, err := s.Acquire(ctx, persistence.AcquireRequest{Unit: "jobs/slot-0", Owner: "a", TTL: time.Minute, Live: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	var raw any
	_, err = s.Apply(ctx, &persistence.Batch{Source: "jobs", Unit: "jobs/slot-0", Lease: l,
		Ops: []persistence.Op{{Kind: persistence.OpMessage, Position: "1"}},
		Handle: func(ctx context.Context, tx persistence.Tx, _ []persistence.Op) error {
			raw = tx.Raw()
			_, err := tx.Exec(ctx, "INSERT INTO no_such_table VALUES (1)")
			return err
		}})
	if err == nil {
		t.Fatal("bad SQL in a handler: no error")
	}
	var se *msqlite.Error
	if errors.As(err, &se) {
		t.Errorf("a *sqlite.Error leaked: %v", err)
	}
	if !strings.Contains(err.Error(), "no such table") {
		t.Errorf("err = %v, want SQLite's message kept", err)
	}
	if raw == nil {
		t.Error("Raw() = nil, want the *sql.Tx")
	}
}

func TestOpenAcceptsStoreURL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "url.db")
	s, err := sqlite.Open(context.Background(), "sqlite://"+path, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Path() != path {
		t.Errorf("Path() = %q, want %q", s.Path(), path)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the file was not created at %s: %v", path, err)
	}
	if _, err := sqlite.Open(context.Background(), "sqlite:", sqlite.Config{}); err == nil {
		t.Error("an empty path: no error")
	}
}

func TestOpenRefusesAFileThatIsNotSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "junk.db")
	if err := os.WriteFile(path, []byte(strings.Repeat("not a database ", 100)), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := sqlite.Open(context.Background(), path, sqlite.Config{})
	if err == nil {
		_ = s.Close()
		t.Fatal("opening a file that is not a database: no error")
	}
	var se *msqlite.Error
	if errors.As(err, &se) {
		t.Errorf("a *sqlite.Error leaked: %v", err)
	}
}

// TestUpsertReplacesAStoredTextThatIsNotJSON: a records row whose document
// is not JSON (written there by something other than drover) is replaced
// by the next upsert of its key. When the store read the stored document
// back to compare it, such a row failed every batch that held its key, for
// ever.
func TestUpsertReplacesAStoredTextThatIsNotJSON(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "drover.db"), nil)
	l, err := s.Acquire(ctx, persistence.AcquireRequest{Unit: "orders/0", Owner: "node-1", TTL: time.Hour, Live: []string{"node-1"}})
	if err != nil {
		t.Fatal(err)
	}
	put := func(doc, pos string) persistence.Applied {
		t.Helper()
		a, err := s.Apply(ctx, &persistence.Batch{Source: "orders", Unit: l.Unit, Lease: l, Table: "orders",
			Ops: []persistence.Op{{Kind: persistence.OpUpsert, Key: "a", Doc: []byte(doc), Position: pos}}, Checkpoint: pos})
		if err != nil {
			t.Fatalf("apply %s: %v", doc, err)
		}
		return a
	}
	put(`{"id":"a"}`, "1")
	if _, err := sqlite.DB(s).ExecContext(ctx, `UPDATE "orders" SET doc = 'not {json' WHERE key = 'a'`); err != nil {
		t.Fatal(err)
	}
	if a := put(`{"id":"a","n":2}`, "2"); a.Upserted != 1 {
		t.Fatalf("applied %+v over a stored text that is not JSON, want 1 upserted", a)
	}
	rs, err := s.Records(ctx, "orders", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || string(rs[0].Doc) != `{"id":"a","n":2}` {
		t.Fatalf("stored %+v", rs)
	}
}
