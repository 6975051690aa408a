package postgres

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/drover-dev/drover/persistence"
)

// With one connection a group's stream batches all ride one pipeline:
// after a batch the server fails (a lost lease, a refused record) it goes
// on with the next batch after its Sync, and each batch commits or rolls
// back alone.
func TestApplyGroupOnePipeline(t *testing.T) {
	s := openTest(t, pg.URL(t), Config{MaxConns: 1})
	if s.pipes() != 1 {
		t.Fatalf("pipes = %d with one connection", s.pipes())
	}
	ctx := t.Context()
	const n = 6
	ls := make([]persistence.Lease, n)
	for i := range ls {
		ls[i] = acquire(t, s, fmt.Sprintf("orders/%d", i), "node-1")
		// the table known, so that every batch below is pipelined
		if _, err := s.Apply(ctx, &persistence.Batch{Source: "orders", Unit: ls[i].Unit, Lease: ls[i], Table: "orders",
			Ops: upserts(1, fmt.Sprintf("seed-%d-", i), "1"), Checkpoint: "1"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.pool.Exec(ctx, `ALTER TABLE `+s.name("orders")+` ADD CONSTRAINT no_bad CHECK (doc->>'bad' IS NULL)`); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{1, 4} { // taken over: their batches are fenced off
		if _, err := s.Acquire(ctx, persistence.AcquireRequest{Unit: ls[i].Unit, Owner: "node-2", TTL: time.Hour, Live: []string{"node-2"}}); err != nil {
			t.Fatal(err)
		}
	}
	bs := make([]*persistence.Batch, n)
	for i := range bs {
		bs[i] = &persistence.Batch{Source: "orders", Unit: ls[i].Unit, Lease: ls[i], Table: "orders",
			Ops: upserts(3, fmt.Sprintf("u%d-", i), "5"), Checkpoint: "5"}
	}
	bs[2].Ops = append(bs[2].Ops, persistence.Op{Kind: persistence.OpUpsert, Key: "u2-bad", Doc: []byte(`{"bad":1}`), Position: "5"})
	res := s.ApplyGroup(ctx, bs)
	for i, r := range res {
		var ok bool
		switch i {
		case 1, 4:
			ok = errors.Is(r.Err, persistence.ErrLeaseLost)
		case 2:
			ok = persistence.Permanent(r.Err) && !errors.Is(r.Err, persistence.ErrLeaseLost)
		default:
			ok = r.Err == nil && r.Applied.Upserted == 3
		}
		if !ok {
			t.Errorf("batch %d: %+v, %v", i, r.Applied, r.Err)
		}
		cp, err := s.Checkpoint(ctx, ls[i].Unit)
		want := "1"
		if r.Err == nil {
			want = "5"
		}
		if err != nil || cp.Position != want {
			t.Errorf("checkpoint of %s = %q (%v), want %s", ls[i].Unit, cp.Position, err, want)
		}
	}
	recs, err := s.Records(ctx, "orders", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, r := range recs {
		got[r.Key] = true
	}
	for i := range n {
		k := fmt.Sprintf("u%d-%06d", i, 0)
		if got[k] != (res[i].Err == nil) {
			t.Errorf("record %s written %v, batch error %v", k, got[k], res[i].Err)
		}
	}
	// The connection is fit for use after the pipeline.
	if _, err := s.Apply(ctx, &persistence.Batch{Source: "orders", Unit: ls[0].Unit, Lease: ls[0], Table: "orders",
		Ops: upserts(1, "after-", "6"), Checkpoint: "6"}); err != nil {
		t.Fatalf("apply after the group: %v", err)
	}
	// A records table dropped and created again: the statements the
	// connection prepared for the group write to the new table.
	if _, err := s.pool.Exec(ctx, `DROP TABLE `+s.name("orders")); err != nil {
		t.Fatal(err)
	}
	again := func(pos string) []persistence.GroupResult {
		return s.ApplyGroup(ctx, []*persistence.Batch{
			{Source: "orders", Unit: ls[0].Unit, Lease: ls[0], Table: "orders", Ops: upserts(2, "new-0-", pos), Checkpoint: pos},
			{Source: "orders", Unit: ls[3].Unit, Lease: ls[3], Table: "orders", Ops: upserts(2, "new-3-", pos), Checkpoint: pos},
		})
	}
	again("7") // finds the table gone: it is created again by the next apply
	for i, r := range again("8") {
		if r.Err != nil {
			t.Errorf("batch %d after the table came back: %v", i, r.Err)
		}
	}
	if recs, err := s.Records(ctx, "orders", "", 0); err != nil || len(recs) != 4 {
		t.Errorf("records after the table came back: %d, %v; want 4", len(recs), err)
	}
}
