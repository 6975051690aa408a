package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/clock"
	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/persistence/sqlite"
)

// A full disk fails every batch of a group in one transaction, with the
// disk's error (it was the failed rollback's: SQLite had rolled the
// transaction back itself), without running the group again per batch,
// and nothing of it is written.
func TestFullDiskFailsTheGroupOnce(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "full.db"), clock.Real{})
	const n = 6
	var bs []*persistence.Batch
	for i := range n {
		unit := fmt.Sprintf("orders/%d", i)
		l, err := s.Acquire(ctx, persistence.AcquireRequest{Unit: unit, Owner: "a", TTL: time.Minute, Live: []string{"a"}})
		if err != nil {
			t.Fatal(err)
		}
		// A first batch creates the table and the checkpoint row.
		if _, err := s.Apply(ctx, &persistence.Batch{Source: "orders", Unit: unit, Lease: l, Table: "orders",
			Ops: []persistence.Op{{Kind: persistence.OpUpsert, Key: fmt.Sprintf("k%d", i), Doc: []byte(`{"v":0}`), Position: "1"}}, Checkpoint: "1"}); err != nil {
			t.Fatal(err)
		}
		b := &persistence.Batch{Source: "orders", Unit: unit, Lease: l, Table: "orders", Checkpoint: "300"}
		for j := range 300 {
			b.Ops = append(b.Ops, persistence.Op{Kind: persistence.OpUpsert, Key: fmt.Sprintf("u%d-%d", i, j),
				Doc: []byte(fmt.Sprintf(`{"pad":%q}`, strings.Repeat("x", 900))), Position: fmt.Sprint(j + 2)})
		}
		bs = append(bs, b)
	}
	db := sqlite.DB(s)
	var pages int64
	if err := db.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	// The file may not grow: the first batch's rows do not fit. With a
	// page cache of a few pages they spill to the WAL while the batch
	// runs, so the error comes from a statement, not from the commit.
	for _, p := range []string{fmt.Sprintf("PRAGMA max_page_count = %d", pages), "PRAGMA cache_size = 4"} {
		if _, err := db.ExecContext(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	before := sqlite.GroupTxs(s)
	res := s.ApplyGroup(ctx, bs)
	if got := sqlite.GroupTxs(s) - before; got != 1 {
		t.Errorf("the group began %d transactions, want 1", got)
	}
	for i, r := range res {
		if r.Err == nil || persistence.Permanent(r.Err) || errors.Is(r.Err, persistence.ErrLeaseLost) {
			t.Errorf("batch %d: err = %v, want the store's (full) error", i, r.Err)
		}
		// SQLite rolled the transaction back itself: the error says what
		// happened, not that a rollback found no transaction.
		if r.Err != nil && (!strings.Contains(r.Err.Error(), "full") || strings.Contains(r.Err.Error(), "rollback")) {
			t.Errorf("batch %d: err = %v, want the full disk named, without a failed rollback", i, r.Err)
		}
	}
	cps, err := s.Checkpoints(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cps {
		if c.Position != "1" {
			t.Errorf("checkpoint of %s = %s, want 1 (nothing of the group written)", c.Unit, c.Position)
		}
	}
}
