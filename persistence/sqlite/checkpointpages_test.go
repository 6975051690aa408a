package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"

	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/persistence/sqlite"
)

// walFrameHeader and walHeader are the sizes SQLite's WAL format gives
// (https://www.sqlite.org/fileformat2.html#walformat); the header holds
// the page size at byte 8, and a frame starts with the number of the page
// it holds.
const (
	walHeader      = 32
	walFrameHeader = 24
)

// committedPages runs commit and answers the numbers of the pages its
// transaction wrote to the WAL. The store's checkpointer must be stopped:
// a PASSIVE checkpoint on a connection of the test's copies every frame
// first, so that the commit starts the WAL over, and one after it tells
// how many frames the commit wrote.
func committedPages(t *testing.T, path string, commit func()) []uint32 {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=rw")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	frames := func() int {
		var busy, log, copied int
		if err := db.QueryRow("PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &log, &copied); err != nil {
			t.Fatal(err)
		}
		if busy != 0 || log != copied {
			t.Fatalf("checkpoint busy=%d, %d of %d frames copied: the WAL cannot start over", busy, copied, log)
		}
		return log
	}
	frames()
	commit()
	n := frames()
	raw, err := os.ReadFile(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	pageSize := int(binary.BigEndian.Uint32(raw[8:]))
	pages := make([]uint32, n)
	for i := range pages {
		pages[i] = binary.BigEndian.Uint32(raw[walHeader+i*(walFrameHeader+pageSize):])
	}
	return pages
}

// rootPage is the root page of the table or index name.
func rootPage(t *testing.T, s *sqlite.Store, name string) uint32 {
	t.Helper()
	var root uint32
	if err := sqlite.DB(s).QueryRow(`SELECT rootpage FROM sqlite_master WHERE name = ?`, name).Scan(&root); err != nil {
		t.Fatalf("root page of %s: %v", name, err)
	}
	return root
}

// TestCommitLeavesCheckpointIndexAlone: moving a checkpoint changes its
// row only. Its upsert set source to itself, and SQLite rewrites the index
// entries of every column a SET names whatever the value: the page of
// drover_checkpoints_source went to the WAL with every commit, a third of
// the pages of a one-row batch (every frame costs the writer two writes
// and the checkpointer a copy).
func TestCommitLeavesCheckpointIndexAlone(t *testing.T) {
	units := benchUnits(3)
	s, ls, path := leased(t, units...)
	ctx := context.Background()
	pos := 0
	batch := func(u int, keys ...string) *persistence.Batch {
		ops := make([]persistence.Op, len(keys))
		for i, k := range keys {
			pos++
			ops[i] = persistence.Op{Kind: persistence.OpUpsert, Key: k, Position: strconv.Itoa(pos), Doc: []byte(`{"n":` + strconv.Itoa(pos) + `}`)}
		}
		return &persistence.Batch{Source: "bench", Unit: ls[u].Unit, Lease: ls[u], Table: "orders", Ops: ops, Checkpoint: strconv.Itoa(pos)}
	}
	// every unit's checkpoint and the keys stored once
	for u := range units {
		if _, err := s.Apply(ctx, batch(u, "a", "b")); err != nil {
			t.Fatal(err)
		}
	}
	if err := sqlite.StopCheckpointer(s); err != nil {
		t.Fatal(err)
	}
	index := rootPage(t, s, "drover_checkpoints_source")

	pages := committedPages(t, path, func() {
		if _, err := s.Apply(ctx, batch(0, "a")); err != nil {
			t.Fatal(err)
		}
	})
	if slices.Contains(pages, index) || len(pages) != 2 {
		t.Errorf("a one-row batch wrote pages %v, want two (its row's and its checkpoint's), not the checkpoints index's (%d)", pages, index)
	}

	pages = committedPages(t, path, func() {
		for _, r := range s.ApplyGroup(ctx, []*persistence.Batch{batch(1, "a"), batch(2, "b")}) {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
	})
	if slices.Contains(pages, index) || len(pages) != 2 {
		t.Errorf("a group of two one-row batches wrote pages %v, want two (the rows' and the checkpoints'), not the checkpoints index's (%d)", pages, index)
	}
}

// TestCheckpointMovesToAnotherSource: a unit whose stored checkpoint is
// another source's (its name reused) moves as one of its own source
// would, and takes the batch's source, as the upsert did before it left
// source alone: forward, or at the same position newly finished, with
// finished kept once set; one not after the stored one moves nothing.
func TestCheckpointMovesToAnotherSource(t *testing.T) {
	s, ls, _ := leased(t, "orders/0")
	ctx := context.Background()
	apply := func(source, pos string, finished bool) {
		t.Helper()
		b := &persistence.Batch{Source: source, Unit: "orders/0", Lease: ls[0], Table: "orders", Checkpoint: pos, Finished: finished,
			Ops: []persistence.Op{{Kind: persistence.OpUpsert, Key: "k", Position: pos, Doc: []byte(`{"p":` + pos + `}`)}}}
		if _, err := s.Apply(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	stored := func() string {
		t.Helper()
		var out []string
		for _, source := range []string{"a", "b", "c"} {
			cps, err := s.Checkpoints(ctx, source)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range cps {
				out = append(out, fmt.Sprintf("%s:%s@%s finished=%v", c.Source, c.Unit, c.Position, c.Finished))
			}
		}
		return fmt.Sprint(out)
	}
	for _, step := range []struct {
		source, pos string
		finished    bool
		want, why   string
	}{
		{"a", "10", false, "[a:orders/0@10 finished=false]", "first"},
		{"b", "9", false, "[a:orders/0@10 finished=false]", "another source, before the stored one: nothing moves"},
		{"b", "10", false, "[a:orders/0@10 finished=false]", "another source, the same position not finished: nothing moves"},
		{"b", "10", true, "[b:orders/0@10 finished=true]", "another source, the same position newly finished: taken over"},
		{"c", "11", false, "[c:orders/0@11 finished=true]", "another source, forward: taken over, finished kept"},
		{"c", "12", false, "[c:orders/0@12 finished=true]", "then the same source"},
	} {
		apply(step.source, step.pos, step.finished)
		if got := stored(); got != step.want {
			t.Fatalf("%s: stored %s, want %s", step.why, got, step.want)
		}
	}
}
