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
