package postgres

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/persistence/storetest"
	"github.com/drover-dev/drover/testkit"
)

// Issue 10 item 7, on PostgreSQL: the test adds the CHECK constraint
// (doc->>'bad' IS NULL) to a records table drover made; the records of a
// batch that violate it are dead-lettered with the server's message
// (SQLSTATE 23514), alone, the rest of the batch applied, the checkpoint
// at the last message. In handler mode a Put the constraint refuses,
// returned by the handler, is handled the same way.
func TestRefusedRecordsDeadLettered(t *testing.T) {
	storetest.RunRefused(t, storetest.Refusal{
		Seed: 52,
		Store: func(t *testing.T) (func(*testkit.Clock) (persistence.Store, error), func(*testing.T, *testkit.Cluster)) {
			url := pg.URL(t)
			var store *Store
			open := func(*testkit.Clock) (persistence.Store, error) {
				s, err := Open(context.Background(), url, Config{})
				store = s
				return s, err
			}
			// a first message makes the table; then the constraint
			constrain := func(t *testing.T, c *testkit.Cluster) {
				if _, err := c.Publish("orders", "0", storetest.RefusedDocs(1, "first")...); err != nil {
					t.Fatal(err)
				}
				if !c.Settle(time.Minute) {
					t.Fatal("the first message did not settle")
				}
				if _, err := store.pool.Exec(context.Background(), `ALTER TABLE `+store.name("orders")+
					` ADD CONSTRAINT no_bad CHECK (doc->>'bad' IS NULL)`); err != nil {
					t.Fatalf("add the constraint: %v", err)
				}
			}
			return open, constrain
		},
		Records: 28,
		Reason:  `violates check constraint "no_bad" (SQLSTATE 23514)`,
	})
}

// Issue 10 item 6: a batch larger than one statement may carry is refused
// before it is sent, as permanent (the server's own refusal, a protocol
// violation that closes the connection, would look transient), and writes
// nothing.
func TestBatchOverMaxBatchBytesRefused(t *testing.T) {
	old := maxBatchBytes
	maxBatchBytes = 1000
	t.Cleanup(func() { maxBatchBytes = old })
	s := openTest(t, pg.URL(t), Config{})
	ctx := context.Background()
	l, err := s.Acquire(ctx, persistence.AcquireRequest{Unit: "orders/0", Owner: "n", TTL: time.Minute, Live: []string{"n"}})
	if err != nil {
		t.Fatal(err)
	}
	doc := `{"blob":"` + strings.Repeat("x", 400) + `"}`
	ops := []persistence.Op{
		{Kind: persistence.OpUpsert, Key: "a", Doc: []byte(doc), Position: "1"},
		{Kind: persistence.OpUpsert, Key: "b", Doc: []byte(doc), Position: "2"},
		{Kind: persistence.OpDeadLetter, Position: "3", Payload: []byte(doc), Reason: "x"},
	}
	b := &persistence.Batch{Source: "orders", Unit: "orders/0", Lease: l, Table: "orders", Ops: ops, Checkpoint: "3"}
	_, err = s.Apply(ctx, b)
	if !persistence.Permanent(err) || !strings.Contains(err.Error(), "MaxBatchBytes") {
		t.Fatalf("apply of %d bytes over a limit of 1000: err = %v, want a permanent refusal naming MaxBatchBytes", len(doc)*3, err)
	}
	if _, err := s.Checkpoint(ctx, "orders/0"); err == nil {
		t.Error("the refused batch wrote its checkpoint")
	}
	b.Ops, b.Checkpoint = ops[:2], "2"
	if _, err := s.Apply(ctx, b); err != nil {
		t.Fatalf("apply within the limit: %v", err)
	}
}
