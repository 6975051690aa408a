package stores

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/drover-dev/drover/internal/redact"
	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/persistence/memory"
	"github.com/drover-dev/drover/persistence/postgres"
	"github.com/drover-dev/drover/persistence/postgres/pgtest"
	"github.com/drover-dev/drover/persistence/sqlite"
)

var pg = pgtest.New()

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m, pg)) }

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want Target
		err  string // a substring of the error; "" for success
	}{
		{"postgres://u@h:5432/db", Target{Postgres, "postgres://u@h:5432/db"}, ""},
		{"postgresql://u:p@h/db?sslmode=disable", Target{Postgres, "postgresql://u:p@h/db?sslmode=disable"}, ""},
		{"POSTGRES://h/db", Target{Postgres, "POSTGRES://h/db"}, ""},
		{"postgres:///db?host=/run/postgresql", Target{Postgres, "postgres:///db?host=/run/postgresql"}, ""},
		{"sqlite:./drover.db", Target{SQLite, "./drover.db"}, ""},
		{"sqlite:drover.db", Target{SQLite, "drover.db"}, ""},
		{"sqlite:/var/lib/drover/drover.db", Target{SQLite, "/var/lib/drover/drover.db"}, ""},
		{"sqlite:///var/lib/drover/drover.db", Target{SQLite, "/var/lib/drover/drover.db"}, ""},
		{"memory:", Target{Kind: Memory}, ""},

		{"", Target{}, "store URL is empty: want postgres://, postgresql://, sqlite:PATH or memory:"},
		{"   ", Target{}, "store URL is empty"},
		{"./drover.db", Target{}, `"./drover.db" has no scheme`},
		{"/var/lib/drover.db", Target{}, "has no scheme"},
		{"mysql://h/db", Target{}, `unknown scheme "mysql": want postgres://, postgresql://, sqlite:PATH or memory:`},
		{"file:drover.db", Target{}, `unknown scheme "file"`},
		{"sqlite:", Target{}, "empty path"},
		{"sqlite://", Target{}, "a sqlite URL has no host"},
		{"sqlite:///", Target{}, "names a directory"},
		{"sqlite://host/x.db", Target{}, "a sqlite URL has no host"},
		{"sqlite:./x.db?_pragma=foo", Target{}, "sqlite takes no options"},
		{"memory:foo", Target{}, "memory: takes no path"},
		{"postgres:db", Target{}, "want postgres://[user[:password]@]host[:port]/database"},
		{"postgres://h", Target{}, "no database name"},
		{"postgres://h/", Target{}, "no database name"},
		{"postgres:///db", Target{}, "no host"},
		{"postgres://u:s3cret@h", Target{}, `"postgres://u:xxxxx@h": no database name`},
		{"postgres://u:s3cret@h:port/db", Target{}, "not a valid URL"},
	} {
		got, err := Parse(tc.url)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("Parse(%q): %v", tc.url, err)
		case tc.err == "" && got != tc.want:
			t.Errorf("Parse(%q) = %+v, want %+v", tc.url, got, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("Parse(%q): err %v, want it to contain %q", tc.url, err, tc.err)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Parse(%q): the error shows the password: %v", tc.url, err)
		}
	}
}

// A password with an unescaped '@' (postgres://drover:p@ss-secret@h/db):
// pgx ends the user info at the first '@' and quoted the rest of the
// password as the host ("lookup ss-secret@127.0.0.1: no such host"),
// which the masking (to the last '@') did not know for a secret. Parse
// and Open refuse it, say to percent-encode, and show nothing of it.
func TestParseRefusesTwoAts(t *testing.T) {
	for _, raw := range []string{
		"postgres://drover:p@ss-secret@127.0.0.1:1/db",
		"postgresql://drover:p@ss-secret@h1,h2/db",
		"postgres://drover:p@ss-secret@127.0.0.1:1/db?sslmode=disable",
		"postgres://drover@127.0.0.1:1/db?application_name=p@ss-secret",
		"postgres:drover:p@ss-secret@h",
	} {
		_, perr := Parse(raw)
		_, oerr := Open(t.Context(), raw, Options{})
		for what, err := range map[string]error{"Parse": perr, "Open": oerr} {
			if !errors.Is(err, redact.ErrUnescapedAt) || !strings.Contains(err.Error(), "as %40") {
				t.Errorf("%s(%s): %v, want the percent-encoding advice", what, redact.URL(raw), err)
				continue
			}
			if strings.Contains(err.Error(), "ss-secret") || strings.Contains(err.Error(), "127.0.0.1") || strings.Contains(err.Error(), "drover") {
				t.Errorf("%s: the error quotes the URL: %v", what, err)
			}
		}
	}
	// Should such a URL reach pgx anyway, its error is scrubbed of every
	// '@'-piece of the password (a host name with '@' is no domain name:
	// the resolver refuses it without asking anyone).
	raw := "postgres://drover:p@ss-secret@127.0.0.1:1/db?connect_timeout=5"
	_, err := postgres.Open(t.Context(), raw, postgres.Config{})
	if err == nil || !strings.Contains(err.Error(), "ss-secret") {
		t.Fatalf("pgx no longer quotes the host it split off: %v", err)
	}
	if msg := scrub(raw, err).Error(); strings.Contains(msg, "ss-secret") {
		t.Errorf("scrub left the password's piece: %s", msg)
	}
	// escaped, it is one URL every reader splits alike
	if _, err := Parse("postgres://drover:p%40ss-secret@127.0.0.1:1/db"); err != nil {
		t.Errorf("Parse with %%40: %v", err)
	}
}

// exercise writes through a store and reads back, proving it works.
func exercise(t *testing.T, s persistence.Store) {
	t.Helper()
	ctx := t.Context()
	l, err := s.Acquire(ctx, persistence.AcquireRequest{Unit: "orders/0", Owner: "n1", TTL: time.Minute, Live: []string{"n1"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply(ctx, &persistence.Batch{Source: "orders", Unit: "orders/0", Lease: l, Table: "orders",
		Ops: []persistence.Op{{Kind: persistence.OpUpsert, Key: "a", Doc: []byte(`{"a":1}`), Position: "1"}}, Checkpoint: "1"}); err != nil {
		t.Fatal(err)
	}
	rs, err := s.Records(ctx, "orders", "", 0)
	if err != nil || len(rs) != 1 || rs[0].Key != "a" {
		t.Fatalf("records = %v, %v; want key a", rs, err)
	}
}

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	abs := filepath.Join(dir, "abs.db")
	for _, tc := range []struct {
		name string
		url  func(t *testing.T) string
		file string // the sqlite file that must exist afterwards
		is   func(persistence.Store) bool
	}{
		{"memory", func(*testing.T) string { return "memory:" }, "",
			func(s persistence.Store) bool { _, ok := s.(*memory.Store); return ok }},
		{"sqlite absolute", func(*testing.T) string { return "sqlite:" + abs }, abs,
			func(s persistence.Store) bool { _, ok := s.(*sqlite.Store); return ok }},
		{"sqlite URL style", func(*testing.T) string { return "sqlite://" + filepath.Join(dir, "url.db") }, filepath.Join(dir, "url.db"),
			func(s persistence.Store) bool { _, ok := s.(*sqlite.Store); return ok }},
		{"postgres", func(t *testing.T) string { return pg.URL(t) }, "",
			func(s persistence.Store) bool { _, ok := s.(*postgres.Store); return ok }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(t.Context(), tc.url(t), Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if !tc.is(s) {
				t.Fatalf("Open gave a %T", s)
			}
			exercise(t, s)
			if tc.file != "" {
				if _, err := os.Stat(tc.file); err != nil {
					t.Errorf("the database file: %v", err)
				}
			}
		})
	}
}

func TestOpenSQLiteRelative(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	s, err := Open(t.Context(), "sqlite:./rel.db", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	exercise(t, s)
	if _, err := os.Stat(filepath.Join(dir, "rel.db")); err != nil {
		t.Errorf("sqlite:./rel.db did not create rel.db in the working directory: %v", err)
	}
}

func TestOpenFailureHidesPassword(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	// Port 1 on loopback: nothing listens.
	for _, u := range []string{
		"postgres://drover:s3cret@127.0.0.1:1/db?sslmode=disable&connect_timeout=5",
		"postgres://drover@127.0.0.1:1/db?sslmode=disable&connect_timeout=5&password=s3cret",
		"postgres://drover:s3%63ret@127.0.0.1:1/db?sslmode=disable&connect_timeout=5",
		// pgx refuses the parameter and quotes the URL
		"postgres://drover:s3cret@127.0.0.1:1/db?sslmode=bogus",
	} {
		_, err := Open(ctx, u, Options{})
		if err == nil {
			t.Fatal("opened a store on a port nobody listens on")
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("the error shows the password: %v", err)
		}
		if q := Query(ctx, u, "SELECT 1", nil, func(func(...any) error) error { return nil }); q == nil || strings.Contains(q.Error(), "s3cret") {
			t.Errorf("Query: %v", q)
		}
	}
}

// Issue 10, item 3: Parse echoed the raw URL in its errors (`drover dlq
// --store '//u:pw@…'`). Every form a secret can take in a store URL is
// refused without showing it.
func TestParseNeverShowsASecret(t *testing.T) {
	for _, raw := range []string{
		"//u:s3cret@h/db",
		"u:s3cret@h/db",
		"s3cret@h:5432/db",
		"host=h user=u password=s3cret dbname=d",
		"host=h password='s3 cret' dbname=d",
		"postgres:u:s3cret@h/db",
		"postgres://u:s3cret@h",
		"postgres://h?password=s3cret",
		"postgresql://u@h:port/db?password=s3cret",
		"mysql://u:s3cret@h/db",
		"memory:u:s3cret@h",
		"sqlite://u:s3cret@h/x.db",
		"sqlite:./x.db?_auth_pass=s3cret",
	} {
		_, err := Parse(raw)
		if err == nil {
			t.Errorf("Parse(%q) accepted", raw)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "s3 cret") {
			t.Errorf("Parse(%q): the error shows the secret: %v", raw, err)
		}
		if !strings.Contains(err.Error(), "xxxxx") {
			t.Errorf("Parse(%q): the error does not show the masked URL: %v", raw, err)
		}
	}
}

// Query reads a SQL store's tables, and refuses the memory store.
func TestQuery(t *testing.T) {
	ctx := context.Background()
	url := "sqlite:" + filepath.Join(t.TempDir(), "q.db")
	s, err := Open(ctx, url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, persistence.AcquireRequest{Unit: "a/0", Owner: "n1", TTL: time.Minute, Live: []string{"n1"}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	var units []string
	err = Query(ctx, url, `SELECT unit FROM drover_leases WHERE owner = $1`, []any{"n1"}, func(scan func(...any) error) error {
		var u string
		if err := scan(&u); err != nil {
			return err
		}
		units = append(units, u)
		return nil
	})
	if err != nil || len(units) != 1 || units[0] != "a/0" {
		t.Fatalf("units %v, err %v", units, err)
	}
	if err := Query(ctx, "memory:", "SELECT 1", nil, func(func(...any) error) error { return nil }); err == nil {
		t.Fatal("querying the memory store: no error")
	}
}

// Options.Timeout and Options.MaxConns reach the store: the session's
// statement_timeout (PostgreSQL) and busy_timeout (SQLite) follow Timeout,
// and with MaxConns 1 a second PostgreSQL call waits for the connection a
// batch holds (SQLite has one connection whatever MaxConns says).
func TestOpenPassesTimeoutAndMaxConns(t *testing.T) {
	for _, tc := range []struct {
		name, url, show, want string
	}{
		{"postgres", pg.URL(t), "SELECT current_setting('statement_timeout')", "4s"},
		{"sqlite", "sqlite:" + filepath.Join(t.TempDir(), "t.db"), "PRAGMA busy_timeout", "4000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(t.Context(), tc.url, Options{Timeout: 4 * time.Second, MaxConns: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			l, err := s.Acquire(t.Context(), persistence.AcquireRequest{Unit: "jobs/0", Owner: "n1", TTL: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			var got string
			var blocked error
			_, err = s.Apply(t.Context(), &persistence.Batch{Source: "jobs", Unit: l.Unit, Lease: l,
				Ops: []persistence.Op{{Kind: persistence.OpMessage, Position: "1"}},
				Handle: func(ctx context.Context, tx persistence.Tx, _ []persistence.Op) error {
					var row interface{ Scan(...any) error }
					switch raw := tx.Raw().(type) {
					case pgx.Tx:
						row = raw.QueryRow(ctx, tc.show)
						// The batch holds the pool's one connection.
						short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
						defer cancel()
						_, blocked = s.List(short)
					case *sql.Tx:
						row = raw.QueryRowContext(ctx, tc.show)
					default:
						return fmt.Errorf("Raw() = %T", raw)
					}
					return row.Scan(&got)
				}})
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("%s = %s, want %s", tc.show, got, tc.want)
			}
			if tc.name == "postgres" && !errors.Is(blocked, context.DeadlineExceeded) {
				t.Errorf("a second call while a batch holds the connection: %v, want it to wait (MaxConns 1)", blocked)
			}
		})
	}
	if _, err := Open(t.Context(), "memory:", Options{MaxConns: -1}); err == nil {
		t.Error("MaxConns -1: no error")
	}
}
