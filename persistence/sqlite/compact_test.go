package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/persistence/sqlite"
)

// compactCorpus are documents whose stored text must not change now that
// the upsert stores CompactJSON's text instead of SQLite's json() of it.
var compactCorpus = []string{
	`{"id":1}`,
	` { "id" : 1 , "name" : "John  Smith" , "tags" : [ "a" , "b c" ] } `,
	"{\n\t\"a\":\r\n [1,\n2]}",
	`{"esc":"q\"b\\s\/u\u00e9\ud83d\ude00\n\t\r\b\f","raw":"é😀"}`,
	`{"n":[-0,0,1.50,1e5,1E+5,-2.5e-3,12345678901234567890123456789,1e400,0.1e-7]}`,
	`{"dup":1,"dup":2, "dup" : {"x":[]}}`,
	`{"e":{},"a":[],"t":true,"f":false,"z":null,"nested":{"a":{"b":{"c":[[[{}]]]}}}}`,
	`{"key with spaces":" leading and trailing "}`,
}

func TestCompactJSONIsSQLiteJSON(t *testing.T) {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "json.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, doc := range compactCorpus {
		var want string
		if err := db.QueryRow(`SELECT json(?)`, doc).Scan(&want); err != nil {
			t.Fatalf("json(%q): %v", doc, err)
		}
		got, err := sqlite.CompactJSON([]byte(doc))
		if err != nil {
			t.Errorf("CompactJSON(%q): %v", doc, err)
			continue
		}
		if string(got) != want {
			t.Errorf("CompactJSON(%q) = %s, SQLite's json() = %s", doc, got, want)
		}
	}
}

// TestStoredDocIsCompact: Apply and a handler's Put store each document
// as SQLite's json() of it.
func TestStoredDocIsCompact(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "drover.db"), nil)
	l, err := s.Acquire(ctx, persistence.AcquireRequest{Unit: "c/0", Owner: "n", TTL: time.Hour, Live: []string{"n"}})
	if err != nil {
		t.Fatal(err)
	}
	var ops []persistence.Op
	for i, doc := range compactCorpus {
		ops = append(ops, persistence.Op{Kind: persistence.OpUpsert, Key: string(rune('a' + i)), Doc: []byte(doc), Position: "1"})
	}
	ops = append(ops, persistence.Op{Kind: persistence.OpMessage, Position: "2"})
	_, err = s.Apply(ctx, &persistence.Batch{Source: "c", Unit: l.Unit, Lease: l, Table: "c", Ops: ops, Checkpoint: "2",
		Handle: func(ctx context.Context, tx persistence.Tx, _ []persistence.Op) error {
			return tx.Put(ctx, "c", "put", []byte(compactCorpus[1]))
		}})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := s.Records(ctx, "c", "", 100)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+s.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if len(recs) != len(compactCorpus)+1 {
		t.Fatalf("%d records, want %d", len(recs), len(compactCorpus)+1)
	}
	for _, r := range recs {
		doc := compactCorpus[1]
		if r.Key != "put" {
			doc = compactCorpus[r.Key[0]-'a']
		}
		var want string
		if err := db.QueryRow(`SELECT json(?)`, doc).Scan(&want); err != nil {
			t.Fatal(err)
		}
		if string(r.Doc) != want {
			t.Errorf("record %s stored %s, want SQLite's json() of it: %s", r.Key, r.Doc, want)
		}
	}
}
