package memory_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/persistence/memory"
	"github.com/drover-dev/drover/persistence/storetest"
)

var start = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func newStore(t *testing.T) (*memory.Store, *storetest.Clock) {
	t.Helper()
	clk := storetest.NewClock(start)
	s := memory.New(memory.Config{Clock: clk})
	t.Cleanup(func() { _ = s.Close() })
	return s, clk
}

func acquire(t *testing.T, s *memory.Store, unit, owner string) persistence.Lease {
	t.Helper()
	l, err := s.Acquire(context.Background(), persistence.AcquireRequest{Unit: unit, Owner: owner, TTL: time.Minute, Live: []string{owner}})
	if err != nil {
		t.Fatalf("acquire %s as %s: %v", unit, owner, err)
	}
	return l
}

func upsert(key, doc, pos string) persistence.Op {
	return persistence.Op{Kind: persistence.OpUpsert, Key: key, Doc: []byte(doc), Position: pos}
}

func records(t *testing.T, s *memory.Store, table string) map[string]string {
	t.Helper()
	rs, err := s.Records(context.Background(), table, "", 0)
	if err != nil {
		t.Fatalf("records: %v", err)
	}
	out := make(map[string]string, len(rs))
	for _, r := range rs {
		out[r.Key] = string(r.Doc)
	}
	return out
}

func TestFailNextPerOperation(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	boom := errors.New("boom")
	s.FailNext(memory.OpAcquire, 2, boom)
	req := persistence.AcquireRequest{Unit: "u/0", Owner: "a", TTL: time.Minute, Live: []string{"a"}}
	for i := range 2 {
		if _, err := s.Acquire(ctx, req); !errors.Is(err, boom) {
			t.Fatalf("acquire %d: err = %v, want boom", i, err)
		}
	}
	// Other operations are not affected, and the rule is used up.
	if _, err := s.List(ctx); err != nil {
		t.Fatalf("list: %v", err)
	}
	l, err := s.Acquire(ctx, req)
	if err != nil {
		t.Fatalf("third acquire: %v", err)
	}
	if l.Token != 1 {
		t.Errorf("token = %d, want 1: failed acquires must not count", l.Token)
	}

	s.FailNext(memory.OpApply, 1, nil)
	b := &persistence.Batch{Source: "u", Unit: "u/0", Lease: l, Table: "t", Ops: []persistence.Op{upsert("k", `{"v":1}`, "1")}, Checkpoint: "1"}
	if _, err := s.Apply(ctx, b); !errors.Is(err, persistence.ErrInjected) {
		t.Fatalf("apply: err = %v, want ErrInjected", err)
	}
	if got := records(t, s, "t"); len(got) != 0 {
		t.Fatalf("records after a failed apply: %v", got)
	}
	if _, err := s.Apply(ctx, b); err != nil {
		t.Fatalf("apply after the fault: %v", err)
	}

	s.FailNext(memory.OpCheckpoint, 1, nil)
	if _, err := s.Checkpoint(ctx, "u/0"); !errors.Is(err, persistence.ErrInjected) {
		t.Fatalf("checkpoint: err = %v, want ErrInjected", err)
	}
	if c, err := s.Checkpoint(ctx, "u/0"); err != nil || c.Position != "1" {
		t.Fatalf("checkpoint = %+v, %v; want position 1", c, err)
	}
}

func TestFailNextAnyMatchesEveryCall(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	s.FailNext(memory.OpAny, 3, nil)
	if _, err := s.List(ctx); !errors.Is(err, persistence.ErrInjected) {
		t.Errorf("list: %v", err)
	}
	if _, err := s.Records(ctx, "t", "", 0); !errors.Is(err, persistence.ErrInjected) {
		t.Errorf("records: %v", err)
	}
	if _, err := s.PruneDedupe(ctx, start); !errors.Is(err, persistence.ErrInjected) {
		t.Errorf("prune: %v", err)
	}
	if _, err := s.DeadLetters(ctx, persistence.DeadLetterFilter{}); err != nil {
		t.Errorf("fourth call: %v, want the rule used up", err)
	}
}

func TestFailNextUnknownOpPanics(t *testing.T) {
	s, _ := newStore(t)
	defer func() {
		if recover() == nil {
			t.Error("FailNext(\"fetch\") did not panic")
		}
	}()
	s.FailNext("fetch", 1, nil)
}

func TestSetDown(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	down := errors.New("connection refused")
	s.SetDown(down)
	if _, err := s.List(ctx); !errors.Is(err, down) {
		t.Fatalf("list while down: %v", err)
	}
	if _, err := s.Acquire(ctx, persistence.AcquireRequest{Unit: "u/0", Owner: "a", TTL: time.Minute}); !errors.Is(err, down) {
		t.Fatalf("acquire while down: %v", err)
	}
	s.SetDown(nil)
	if l := acquire(t, s, "u/0", "a"); l.Token != 1 {
		t.Fatalf("token after the outage = %d, want 1", l.Token)
	}
}

func TestFailAfterCommitIsAmbiguous(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	l := acquire(t, s, "u/0", "a")
	s.FailAfterCommit(1)
	b := &persistence.Batch{Source: "u", Unit: "u/0", Lease: l, Table: "t", Ops: []persistence.Op{upsert("k", `{"v":1}`, "7")}, Checkpoint: "7"}
	if _, err := s.Apply(ctx, b); !errors.Is(err, persistence.ErrInjected) {
		t.Fatalf("apply: err = %v, want ErrInjected", err)
	}
	if got := records(t, s, "t"); got["k"] != `{"v":1}` {
		t.Fatalf("records = %v: the batch must be committed despite the error", got)
	}
	if c, err := s.Checkpoint(ctx, "u/0"); err != nil || c.Position != "7" {
		t.Fatalf("checkpoint = %+v, %v; want 7", c, err)
	}
	// Only one Apply was affected.
	b.Checkpoint = "8"
	if _, err := s.Apply(ctx, b); err != nil {
		t.Fatalf("second apply: %v", err)
	}
}

func TestBreakFencingLetsAZombieCommit(t *testing.T) {
	ctx := context.Background()
	s, clk := newStore(t)
	old := acquire(t, s, "u/0", "a")
	clk.Advance(2 * time.Minute)
	acquire(t, s, "u/0", "b")
	b := &persistence.Batch{Source: "u", Unit: "u/0", Lease: old, Table: "t", Ops: []persistence.Op{upsert("k", `{"zombie":true}`, "1")}}
	if _, err := s.Apply(ctx, b); !errors.Is(err, persistence.ErrLeaseLost) {
		t.Fatalf("fenced apply with a stale token: %v, want ErrLeaseLost", err)
	}
	s.BreakFencing(true)
	if _, err := s.Apply(ctx, b); err != nil {
		t.Fatalf("apply with fencing broken: %v", err)
	}
	if got := records(t, s, "t"); got["k"] != `{"zombie":true}` {
		t.Fatalf("records = %v, want the zombie's write", got)
	}
	s.BreakFencing(false)
	if _, err := s.Apply(ctx, b); !errors.Is(err, persistence.ErrLeaseLost) {
		t.Fatalf("apply with fencing restored: %v, want ErrLeaseLost", err)
	}
}

func TestReturnedAndGivenSlicesAreCopies(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	l := acquire(t, s, "u/0", "a")
	doc := []byte(`{"v":1}`)
	payload := []byte("raw")
	b := &persistence.Batch{Source: "u", Unit: "u/0", Lease: l, Table: "t", Ops: []persistence.Op{
		{Kind: persistence.OpUpsert, Key: "k", Doc: doc, Position: "1"},
		{Kind: persistence.OpDeadLetter, Position: "2", Payload: payload, Reason: "bad"},
	}}
	if _, err := s.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	doc[6] = '9'
	payload[0] = 'X'
	rs, err := s.Records(ctx, "t", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	rs[0].Doc[6] = '8'
	dls, err := s.DeadLetters(ctx, persistence.DeadLetterFilter{})
	if err != nil {
		t.Fatal(err)
	}
	dls[0].Payload[0] = 'Y'
	if got := records(t, s, "t"); got["k"] != `{"v":1}` {
		t.Errorf("stored doc = %s, want {\"v\":1}", got["k"])
	}
	d, err := s.DeadLetter(ctx, dls[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if string(d.Payload) != "raw" {
		t.Errorf("stored payload = %q, want raw", d.Payload)
	}
}

func TestClosedStoreRefusesCalls(t *testing.T) {
	s, _ := newStore(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.List(context.Background()); err == nil {
		t.Fatal("list on a closed store: no error")
	}
}

func TestTxExecUnsupportedRawNil(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	l := acquire(t, s, "jobs/slot-0", "a")
	var execErr error
	var raw any = "unset"
	b := &persistence.Batch{Source: "jobs", Unit: "jobs/slot-0", Lease: l,
		Ops: []persistence.Op{{Kind: persistence.OpMessage, Position: "m-1", MessageID: "m-1"}},
		Handle: func(ctx context.Context, tx persistence.Tx, _ []persistence.Op) error {
			_, execErr = tx.Exec(ctx, "SELECT 1")
			raw = tx.Raw()
			return nil
		}}
	if _, err := s.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(execErr, persistence.ErrUnsupported) {
		t.Errorf("Exec: err = %v, want ErrUnsupported", execErr)
	}
	if raw != nil {
		t.Errorf("Raw() = %v, want nil", raw)
	}
}

func TestTxUnusableAfterApply(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	l := acquire(t, s, "jobs/slot-0", "a")
	var kept persistence.Tx
	b := &persistence.Batch{Source: "jobs", Unit: "jobs/slot-0", Lease: l,
		Ops:    []persistence.Op{{Kind: persistence.OpMessage, Position: "m-1"}},
		Handle: func(_ context.Context, tx persistence.Tx, _ []persistence.Op) error { kept = tx; return nil }}
	if _, err := s.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := kept.Put(ctx, "jobs", "late", []byte(`{}`)); err == nil {
		t.Fatal("Put after Apply returned: no error")
	}
	if got := records(t, s, "jobs"); len(got) != 0 {
		t.Fatalf("a late Put reached the store: %v", got)
	}
}
