package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/persistence/sqlite"
	"github.com/drover-dev/drover/persistence/storetest"
)

// Issue 10, item 9: `drover dlq list --store sqlite:/typo.db` created and
// migrated a new database. A store that must exist is never created.
func TestMustExistAndReadOnlyRefuseAMissingFile(t *testing.T) {
	for _, cfg := range []sqlite.Config{{MustExist: true}, {ReadOnly: true}} {
		path := filepath.Join(t.TempDir(), "typo.db")
		s, err := sqlite.Open(context.Background(), path, cfg)
		if err == nil {
			_ = s.Close()
			t.Fatalf("%+v: a missing file was opened", cfg)
		}
		if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), path) {
			t.Errorf("%+v: err = %v, want one wrapping fs.ErrNotExist and naming the path", cfg, err)
		}
		if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%+v: the file was created (stat: %v)", cfg, err)
		}
	}
}

// seedDeadLetter writes one dead letter into a fresh store at path.
func seedDeadLetter(t *testing.T, path string) int64 {
	t.Helper()
	ctx := context.Background()
	s, err := sqlite.Open(ctx, path, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.ApplyPeople(t, s, "n1", "1", persistence.Op{Kind: persistence.OpDeadLetter, Position: "1", Payload: []byte("junk"), Reason: "invalid JSON"})
	dls, err := s.DeadLetters(ctx, persistence.DeadLetterFilter{})
	if err != nil || len(dls) != 1 {
		t.Fatalf("seeded dead letters: %v %v", dls, err)
	}
	return dls[0].ID
}

// seeded is a store at a fresh path that seedDeadLetter seeded, opened
// with cfg (closed when t ends), and the dead letter's id.
func seeded(t *testing.T, cfg sqlite.Config) (*sqlite.Store, int64) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "d.db")
	id := seedDeadLetter(t, path)
	return openConfig(t, path, cfg), id
}

func TestReadOnlyReadsAndNeverWrites(t *testing.T) {
	ctx := context.Background()
	s, id := seeded(t, sqlite.Config{ReadOnly: true})
	d, err := s.DeadLetter(ctx, id)
	if err != nil || string(d.Payload) != "junk" {
		t.Fatalf("DeadLetter(%d) = %+v, %v", id, d, err)
	}
	if err := s.SetDeadLetterStatus(ctx, id, persistence.DeadLetterResolved); err == nil {
		t.Fatal("a write through a read-only store succeeded")
	}
	if _, err := s.Acquire(ctx, persistence.AcquireRequest{Unit: "people/0", Owner: "n2", TTL: time.Minute, Live: []string{"n2"}}); err == nil {
		t.Fatal("Acquire through a read-only store succeeded")
	}
	if d, _ := s.DeadLetter(ctx, id); d.Status != persistence.DeadLetterPending {
		t.Errorf("status after the refused write: %s", d.Status)
	}
}

// A read-only open migrates nothing: an older schema and a file that is
// SQLite but not drover's are refused and left as they are.
func TestReadOnlyDoesNotMigrate(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()

	old := filepath.Join(dir, "old.db")
	seedDeadLetter(t, old)
	db := execFile(t, old, `UPDATE drover_schema SET version = 1`)
	refusedReadOnly(t, old, "an older schema", "schema version 1")
	var v int
	if err := db.QueryRow(`SELECT version FROM drover_schema`).Scan(&v); err != nil || v != 1 {
		t.Errorf("schema version after a read-only open: %d %v", v, err)
	}
	if _, err := db.Exec(`UPDATE drover_schema SET version = 1000`); err != nil {
		t.Fatal(err)
	}
	if s, err := sqlite.Open(ctx, old, sqlite.Config{ReadOnly: true}); err == nil || !errors.Is(err, persistence.ErrSchemaTooNew) {
		if s != nil {
			_ = s.Close()
		}
		t.Errorf("newer schema: err = %v, want ErrSchemaTooNew", err)
	}

	other := filepath.Join(dir, "other.db")
	odb := execFile(t, other, `CREATE TABLE notes (x TEXT)`)
	refusedReadOnly(t, other, "a database without drover's tables", "not a drover store")
	var n int
	if err := odb.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name LIKE 'drover%'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d drover objects were created in a database that had none (%v)", n, err)
	}
}

// execFile opens the SQLite file at path through database/sql alone, until
// the test ends, and runs stmt on it.
func execFile(t *testing.T, path, stmt string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if _, err := db.Exec(stmt); err != nil {
		t.Fatal(err)
	}
	return db
}

// refusedReadOnly fails t unless a read-only open of the file at path (what
// it holds) fails with an error that contains want.
func refusedReadOnly(t *testing.T, path, what, want string) {
	t.Helper()
	if s, err := sqlite.Open(context.Background(), path, sqlite.Config{ReadOnly: true}); err == nil {
		_ = s.Close()
		t.Fatalf("a read-only open accepted %s", what)
	} else if !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v, want it to contain %q", err, want)
	}
}

// MustExist opens an existing file read-write, migrations included.
func TestMustExistOpensAnExistingFile(t *testing.T) {
	ctx := context.Background()
	s, id := seeded(t, sqlite.Config{MustExist: true})
	if err := s.SetDeadLetterStatus(ctx, id, persistence.DeadLetterResolved); err != nil {
		t.Fatalf("a write through a MustExist store: %v", err)
	}
}

// Issue 10, item 8: every object of drover's schema is a name no records
// table may take, in any case ("Drover_leases" is drover_leases in SQLite),
// and so is every SQLite internal name.
func TestDroversOwnNamesAreReserved(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "d.db"), nil)
	db := rawDB(t, s)
	rows, err := db.Query(`SELECT name FROM sqlite_master`)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(names) < 7 {
		t.Fatalf("sqlite_master lists only %v", names)
	}
	names = append(names, "sqlite_master", "sqlite_sequence", "sqlite_schema")
	for _, n := range names {
		for _, v := range []string{n, strings.ToUpper(n), strings.ToUpper(n[:1]) + n[1:]} {
			if err := persistence.ValidTable(v); err == nil {
				t.Errorf("ValidTable(%q) = nil: a records table could take a name of drover or SQLite", v)
			}
		}
	}
}
