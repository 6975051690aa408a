package postgres

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/persistence"
)

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
