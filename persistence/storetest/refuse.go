package storetest

import (
	"bytes"
	"context"
	"errors"

	"github.com/drover-dev/drover/persistence"
)

func needsRefuse(h Harness) bool { return h.Refuse != nil }

func testDeadLetterCut(e *env) {
	l := e.acquire("orders/0", "node-1")
	cut := dead("1", "message of 100 bytes exceeds max_message_bytes 50")
	cut.Payload, cut.PayloadBytes = []byte("0123456789"), 100
	whole := dead("2", "not JSON")
	empty := dead("3", "no key")
	empty.Payload = nil
	e.apply(&persistence.Batch{Source: "orders", Unit: l.Unit, Lease: l, Ops: []persistence.Op{cut, whole, empty}})
	ds := e.deadLetters(persistence.DeadLetterFilter{})
	if len(ds) != 3 {
		e.t.Fatalf("dead letters = %+v, want 3", ds)
	}
	byPos := map[string]persistence.DeadLetter{}
	for _, d := range ds {
		byPos[d.Position] = d
	}
	if d := byPos["1"]; string(d.Payload) != "0123456789" || d.PayloadBytes != 100 || !d.Cut() {
		e.t.Errorf("cut dead letter: payload %q, payload bytes %d, cut %v; want the 10 bytes given, 100, cut", d.Payload, d.PayloadBytes, d.Cut())
	}
	if d := byPos["2"]; string(d.Payload) != "payload 2" || d.PayloadBytes != 9 || d.Cut() {
		e.t.Errorf("whole dead letter: payload %q, payload bytes %d, cut %v; want whole: 9 bytes", d.Payload, d.PayloadBytes, d.Cut())
	}
	if d := byPos["3"]; len(d.Payload) != 0 || d.PayloadBytes != 0 || d.Cut() {
		e.t.Errorf("dead letter without payload: payload %q, payload bytes %d, cut %v; want 0 bytes", d.Payload, d.PayloadBytes, d.Cut())
	}
	one, err := e.s.DeadLetter(e.ctx, byPos["1"].ID)
	if err != nil || one.PayloadBytes != 100 || !one.Cut() {
		e.t.Errorf("DeadLetter(%d) = %+v, %v; want payload bytes 100", byPos["1"].ID, one, err)
	}
	// A repeat takes the new payload and its size.
	again := dead("1", "still too big")
	again.Payload = bytes.Repeat([]byte("y"), 20)
	e.apply(&persistence.Batch{Source: "orders", Unit: l.Unit, Lease: l, Ops: []persistence.Op{again}})
	r, err := e.s.DeadLetter(e.ctx, byPos["1"].ID)
	if err != nil || r.PayloadBytes != 20 || r.Cut() || r.Attempts != 2 {
		e.t.Errorf("repeated dead letter = %+v, %v; want whole, 20 bytes, 2 attempts", r, err)
	}
}

func testInvalidDocPermanent(e *env) {
	l := e.acquire("orders/0", "node-1")
	e.seed(l)
	b := streamFullBatch(l, "5")
	b.Ops = append(b.Ops, upsert("z", `{"broken":`, "55"))
	b.Checkpoint = "55"
	_, err := e.s.Apply(e.ctx, b)
	if !persistence.Permanent(err) {
		e.t.Errorf("apply of an invalid JSON document: err = %v, want one matching ErrPermanent", err)
	}
}

// testRefusedRecord: a batch one of whose records the store refuses fails
// permanently, writes nothing, and applies once that record is left out.
func testRefusedRecord(k batchKind) func(*env) {
	return func(e *env) {
		l := e.acquire("orders/0", "node-1")
		e.seed(l)
		e.h.Refuse(e.t, e.s, "orders")
		before := e.snapshot("orders", "orders/0")
		b := k.make(l, "5")
		bad := upsert("bad-1", `{"id":"bad-1","bad":true}`, "55")
		if k.dedupe {
			bad.MessageID = "m-55"
		}
		b.Ops = append(b.Ops, bad)
		b.Checkpoint = "55"
		_, err := e.s.Apply(e.ctx, b)
		if !persistence.Permanent(err) || errors.Is(err, persistence.ErrBusy) || errors.Is(err, persistence.ErrLeaseLost) {
			e.t.Fatalf("apply of a record the store refuses: err = %v, want one matching ErrPermanent only", err)
		}
		e.wantUnchanged(before, "orders", "orders/0", l, k.dedupePos("5"))
		// The same batch without it commits.
		b = k.make(l, "5")
		if _, err := e.s.Apply(e.ctx, b); err != nil {
			e.t.Fatalf("apply without the refused record: %v", err)
		}
		if _, ok := e.records("orders")["a"]; !ok {
			e.t.Error("the batch without the refused record wrote no record")
		}
	}
}

// testRefusedPut: a handler's Put the store refuses says so; the
// handler's error, returned as is, still matches ErrPermanent.
func testRefusedPut(e *env) {
	l := e.acquire("orders/0", "node-1")
	e.seed(l)
	e.h.Refuse(e.t, e.s, "orders")
	before := e.snapshot("orders", "orders/0")
	b := fullBatch(l, "5")
	b.Ops = append(b.Ops, msg("m-56"))
	var putErr error
	b.Handle = func(ctx context.Context, tx persistence.Tx, ops []persistence.Op) error {
		if err := tx.Put(ctx, "orders", "from-handler", []byte(`{"h":1}`)); err != nil {
			return err
		}
		putErr = tx.Put(ctx, "orders", "bad-h", []byte(`{"bad":1}`))
		return putErr
	}
	_, err := e.s.Apply(e.ctx, b)
	if !persistence.Permanent(putErr) {
		e.t.Fatalf("handler Put of a document the store refuses: err = %v, want one matching ErrPermanent", putErr)
	}
	if !errors.Is(err, putErr) {
		e.t.Errorf("apply: err = %v, want the handler's error %v as is", err, putErr)
	}
	if !persistence.Permanent(err) {
		e.t.Errorf("apply: err = %v, want it to match ErrPermanent", err)
	}
	e.wantUnchanged(before, "orders", "orders/0", l, "5")
}
