package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
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
	s, ls, _ := leased(t, "orders/0")
	l := ls[0]
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
	pos := 1
	// Texts that are not JSON, some of which a lenient parser reads as the
	// new document (an unknown escape, a raw tab in a string, a leading
	// zero): each is replaced by the next upsert of its key.
	for _, c := range []struct{ stored, doc string }{
		{`not {json`, `{"id":"a","n":2}`},
		{`{"a":"\q"}`, `{"a":"\\q"}`},
		{"{\"a\":\"x\ty\"}", `{"a":"x\ty"}`},
		{`{"a":01}`, `{"a":1}`},
	} {
		if _, err := sqlite.DB(s).ExecContext(ctx, `UPDATE "orders" SET doc = ? WHERE key = 'a'`, c.stored); err != nil {
			t.Fatal(err)
		}
		pos++
		if a := put(c.doc, strconv.Itoa(pos)); a.Upserted != 1 {
			t.Fatalf("applied %+v of %s over the stored text %q, want 1 upserted", a, c.doc, c.stored)
		}
		rs, err := s.Records(ctx, "orders", "", 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 1 || string(rs[0].Doc) != c.doc {
			t.Fatalf("stored %+v, want %s", rs, c.doc)
		}
	}
}

// TestApplyEndedByItsContextSaysSo: when the caller's context ends during
// a batch (here inside its Handle), database/sql rolls the transaction
// back, and the store's next statement fails with sql.ErrTxDone; Apply's
// error is the context's (errors.Is context.Canceled), not that driver
// error, which read like a bug of the store.
func TestApplyEndedByItsContextSaysSo(t *testing.T) {
	bg := context.Background()
	s, ls, _ := leased(t, "jobs/0")
	l := ls[0]
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	_, err := s.Apply(ctx, &persistence.Batch{Source: "jobs", Unit: l.Unit, Lease: l, Checkpoint: "1",
		Ops: []persistence.Op{{Kind: persistence.OpMessage, Position: "1"}},
		Handle: func(_ context.Context, tx persistence.Tx, _ []persistence.Op) error {
			cancel()
			// wait until database/sql has rolled the transaction back
			deadline := time.Now().Add(10 * time.Second)
			for {
				if _, err := tx.Exec(bg, "SELECT 1"); err != nil {
					if !strings.Contains(err.Error(), "already been committed or rolled back") {
						return err
					}
					return nil
				}
				if time.Now().After(deadline) {
					return errors.New("the transaction was not rolled back within 10 s of the cancel")
				}
				time.Sleep(time.Millisecond) // polling a condition with a deadline
			}
		}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Apply after its context ended: %v, want context.Canceled", err)
	}
}

// TestUpsertsShareStatements: a batch's upserts run as multi-row
// statements (64, 32, ... 1 rows); each row still counts as upserted or
// unchanged on its own, and every row holds its own document, whichever
// statement wrote it. The second batch's 127 upserts (every third
// unchanged) use each statement once: 64 + 32 + 16 + 8 + 4 + 2 + 1; a
// delete among them. (That rows share statements is what BenchmarkApply
// measures; this checks what they write.)
func TestUpsertsShareStatements(t *testing.T) {
	ctx := context.Background()
	s, ls, _ := leased(t, "orders/0")
	l := ls[0]
	const n = 128
	doc := func(i, v int) []byte { return fmt.Appendf(nil, `{"id":%d,"v":%d}`, i, v) }
	var first []persistence.Op
	for i := range n {
		first = append(first, persistence.Op{Kind: persistence.OpUpsert, Key: fmt.Sprintf("k%03d", i), Doc: doc(i, 1), Position: "1"})
	}
	a, err := s.Apply(ctx, &persistence.Batch{Source: "orders", Unit: l.Unit, Lease: l, Table: "orders", Ops: first, Checkpoint: "1"})
	if err != nil {
		t.Fatal(err)
	}
	if a.Upserted != n || a.Unchanged != 0 {
		t.Fatalf("first batch applied %+v, want %d upserted", a, n)
	}
	// the second: every third document unchanged, k100 deleted
	var second []persistence.Op
	wantUnchanged := 0
	for i := range n {
		key := fmt.Sprintf("k%03d", i)
		if i == 100 {
			second = append(second, persistence.Op{Kind: persistence.OpDelete, Key: key, Position: "2"})
			continue
		}
		v := 2
		if i%3 == 0 {
			v = 1
			wantUnchanged++
		}
		second = append(second, persistence.Op{Kind: persistence.OpUpsert, Key: key, Doc: doc(i, v), Position: "2"})
	}
	a, err = s.Apply(ctx, &persistence.Batch{Source: "orders", Unit: l.Unit, Lease: l, Table: "orders", Ops: second, Checkpoint: "2"})
	if err != nil {
		t.Fatal(err)
	}
	if a.Upserted != n-1-wantUnchanged || a.Unchanged != wantUnchanged || a.Deleted != 1 {
		t.Fatalf("second batch applied %+v, want %d upserted, %d unchanged, 1 deleted", a, n-1-wantUnchanged, wantUnchanged)
	}
	rs, err := s.Records(ctx, "orders", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != n-1 {
		t.Fatalf("%d rows stored, want %d", len(rs), n-1)
	}
	for _, r := range rs {
		var i int
		if _, err := fmt.Sscanf(r.Key, "k%d", &i); err != nil {
			t.Fatal(err)
		}
		want, pos := doc(i, 2), "2"
		if i%3 == 0 {
			want, pos = doc(i, 1), "1" // unchanged: the row as it was
		}
		if i == 100 || string(r.Doc) != string(want) || r.Position != pos {
			t.Errorf("row %s holds %s at %s, want %s at %s", r.Key, r.Doc, r.Position, want, pos)
		}
	}
	// large documents, which the 1 MiB bound of a statement's documents
	// splits (two of 600 KB, then one), are stored whole
	big := strings.Repeat("y", 600<<10)
	var third []persistence.Op
	for i := range 3 {
		third = append(third, persistence.Op{Kind: persistence.OpUpsert, Key: fmt.Sprintf("big%d", i), Doc: fmt.Appendf(nil, `{"i":%d,"pad":%q}`, i, big), Position: "3"})
	}
	a, err = s.Apply(ctx, &persistence.Batch{Source: "orders", Unit: l.Unit, Lease: l, Table: "orders", Ops: third, Checkpoint: "3"})
	if err != nil {
		t.Fatal(err)
	}
	if a.Upserted != 3 {
		t.Fatalf("third batch applied %+v, want 3 upserted", a)
	}
	rs, err = s.Records(ctx, "orders", "big", 3) // big0, big1, big2 sort before k000
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rs {
		if want := fmt.Sprintf(`{"i":%d,"pad":%q}`, i, big); r.Key != fmt.Sprintf("big%d", i) || string(r.Doc) != want {
			t.Errorf("row %d: %s holds %d bytes, want big%d with %d", i, r.Key, len(r.Doc), i, len(want))
		}
	}
	if len(rs) != 3 {
		t.Errorf("%d large rows stored, want 3", len(rs))
	}
}
