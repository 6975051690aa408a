package memory

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/drover-dev/drover/brokers"
)

func mustTx(t *testing.T, s *Stream, partition string) *Tx {
	t.Helper()
	tx, err := s.BeginTx(partition)
	if err != nil {
		t.Fatal(err)
	}
	return tx
}

func txProduce(t *testing.T, tx *Tx, values ...string) []string {
	t.Helper()
	msgs := make([]brokers.Message, len(values))
	for i, v := range values {
		msgs[i] = brokers.Message{Value: []byte(v)}
	}
	pos, err := tx.Produce(msgs...)
	if err != nil {
		t.Fatal(err)
	}
	return pos
}

func produceValues(t *testing.T, s *Stream, partition string, values ...string) []string {
	t.Helper()
	msgs := make([]brokers.Message, len(values))
	for i, v := range values {
		msgs[i] = brokers.Message{Value: []byte(v)}
	}
	pos, err := s.Produce(partition, msgs...)
	if err != nil {
		t.Fatal(err)
	}
	return pos
}

func valuesOf(msgs []brokers.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.Value)
	}
	return out
}

type fetched struct {
	values, positions []string
	lag               int64
}

func fetchOnce(t *testing.T, r brokers.Reader, max int) fetched {
	t.Helper()
	res, err := r.Fetch(context.Background(), max, 0)
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	return fetched{valuesOf(res.Messages), positions(res.Messages), res.Lag}
}

// A read_committed reader: an open transaction holds back what follows it,
// a committed one appears in place, an aborted one never, markers take an
// offset each and are never returned.
func TestTransactionsReadCommitted(t *testing.T) {
	s, _ := newTestStream(t, 1)
	r, _ := s.Open(context.Background(), "0", brokers.Start{})
	step := func(name string, max int, want fetched) {
		t.Helper()
		got := fetchOnce(t, r, max)
		if len(got.values) == 0 && len(want.values) == 0 {
			got.values, got.positions = want.values, want.positions
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: fetch = %+v, want %+v", name, got, want)
		}
	}

	produceValues(t, s, "0", "a") // 0
	tx1 := mustTx(t, s, "0")
	if got := txProduce(t, tx1, "b", "c"); !reflect.DeepEqual(got, []string{"1", "2"}) {
		t.Fatalf("transactional positions = %v", got)
	}
	produceValues(t, s, "0", "d") // 3, behind tx1
	step("tx1 open", 10, fetched{[]string{"a"}, []string{"0"}, 0})
	step("still open", 10, fetched{nil, nil, 0})

	if err := tx1.Commit(); err != nil { // marker at 4
		t.Fatal(err)
	}
	step("tx1 committed", 10, fetched{[]string{"b", "c", "d"}, []string{"1", "2", "3"}, 0})

	tx2 := mustTx(t, s, "0")
	txProduce(t, tx2, "x", "y")         // 5, 6
	produceValues(t, s, "0", "e")       // 7
	if err := tx2.Abort(); err != nil { // marker at 8
		t.Fatal(err)
	}
	if got := produceValues(t, s, "0", "f"); !reflect.DeepEqual(got, []string{"9"}) {
		t.Fatalf("position after an abort marker = %v, want [9]", got)
	}
	// max 1: e, then the marker at 8 is stepped over, f at 9 is left.
	step("tx2 aborted", 1, fetched{[]string{"e"}, []string{"7"}, 1})
	step("after the abort marker", 10, fetched{[]string{"f"}, []string{"9"}, 0})

	// Lag counts against the last stable offset, not the end.
	tx3 := mustTx(t, s, "0")
	produceValues(t, s, "0", "g", "h") // 10, 11: before tx3 writes
	txProduce(t, tx3, "z")             // 12
	produceValues(t, s, "0", "i")      // 13
	step("before tx3", 1, fetched{[]string{"g"}, []string{"10"}, 1})
	step("up to tx3", 10, fetched{[]string{"h"}, []string{"11"}, 0})
	if err := tx3.Commit(); err != nil {
		t.Fatal(err)
	}
	step("tx3 committed", 10, fetched{[]string{"z", "i"}, []string{"12", "13"}, 0})

	// A reader opened after a committed record reads on after it; one at
	// Earliest skips the aborted ones.
	r2, _ := s.Open(context.Background(), "0", brokers.Start{After: "1"})
	if got := fetchOnce(t, r2, 100); !reflect.DeepEqual(got.values, []string{"c", "d", "e", "f", "g", "h", "z", "i"}) {
		t.Fatalf("after 1: %v", got.values)
	}
}

func TestTransactionsOverlapAndLatest(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestStream(t, 1)
	produceValues(t, s, "0", "a") // 0
	tx1, tx2 := mustTx(t, s, "0"), mustTx(t, s, "0")
	txProduce(t, tx2, "b") // 1: tx2's first record comes first
	txProduce(t, tx1, "c") // 2
	latest, err := s.Resolve(ctx, "0", brokers.Latest)
	if err != nil || latest != (brokers.Start{After: "0"}) {
		t.Fatalf("Resolve(Latest) with open transactions = %+v, %v; want after the last stable offset - 1", latest, err)
	}
	rl, _ := s.Open(ctx, "0", brokers.Start{Mode: brokers.Latest})
	if err := tx1.Commit(); err != nil { // 3
		t.Fatal(err)
	}
	if got := fetchOnce(t, rl, 10); len(got.values) != 0 {
		t.Fatalf("tx2 still open, got %v", got.values)
	}
	if err := tx2.Commit(); err != nil { // 4
		t.Fatal(err)
	}
	r, err := s.Open(ctx, "0", latest)
	if err != nil {
		t.Fatal(err)
	}
	for name, rd := range map[string]brokers.Reader{"resolved latest": r, "latest mode": rl} {
		if got := fetchOnce(t, rd, 10); !reflect.DeepEqual(got.values, []string{"b", "c"}) {
			t.Fatalf("%s: %v, want the records committed since", name, got.values)
		}
	}
	latest, _ = s.Resolve(ctx, "0", brokers.Latest)
	if latest != (brokers.Start{After: "4"}) {
		t.Fatalf("Resolve(Latest) after both = %+v, want after the last marker", latest)
	}
}

func TestTransactionEnd(t *testing.T) {
	s, _ := newTestStream(t, 3)
	tx := mustTx(t, s, "0")
	txProduce(t, tx, "a")
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"produce": func() error { _, err := tx.Produce(brokers.Message{}); return err }(),
		"commit":  tx.Commit(),
		"abort":   tx.Abort(),
	} {
		if !errors.Is(err, ErrTxDone) {
			t.Errorf("%s after commit: %v, want ErrTxDone", name, err)
		}
	}

	aborted := mustTx(t, s, "0")
	txProduce(t, aborted, "b")
	if err := aborted.Abort(); err != nil {
		t.Fatal(err)
	}
	if err := aborted.Commit(); !errors.Is(err, ErrTxDone) {
		t.Errorf("commit after abort: %v, want ErrTxDone", err)
	}

	// A transaction that wrote nothing takes no offset.
	empty := mustTx(t, s, "1")
	if err := empty.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := produceValues(t, s, "1", "x"); !reflect.DeepEqual(got, []string{"0"}) {
		t.Fatalf("after an empty transaction: %v", got)
	}

	// A reshard aborts the open transactions of the partition closed.
	r, _ := s.Open(context.Background(), "2", brokers.Start{})
	open := mustTx(t, s, "2")
	txProduce(t, open, "y")
	idle := mustTx(t, s, "2")
	produceValues(t, s, "2", "z")
	if _, err := s.Split("2"); err != nil {
		t.Fatal(err)
	}
	res, err := r.Fetch(context.Background(), 10, time.Minute)
	if err != nil || !reflect.DeepEqual(valuesOf(res.Messages), []string{"z"}) || !res.End {
		t.Fatalf("closed partition = %v End %v, %v; want [z] and End", valuesOf(res.Messages), res.End, err)
	}
	for _, tx := range []*Tx{open, idle} {
		if err := tx.Commit(); !errors.Is(err, ErrTxDone) {
			t.Errorf("commit after the reshard: %v, want ErrTxDone", err)
		}
	}
	if _, err := s.BeginTx("2"); err == nil {
		t.Fatal("a transaction began on a closed partition")
	}
	if _, err := s.BeginTx("9"); !errors.Is(err, brokers.ErrUnknownPartition) {
		t.Fatalf("begin on an unknown partition: %v", err)
	}
	last := mustTx(t, s, "1")
	_ = s.Close()
	if err := last.Commit(); !errors.Is(err, brokers.ErrClosed) {
		t.Fatalf("commit on a closed stream: %v, want ErrClosed", err)
	}
}

func TestTrimKeepsOpenTransaction(t *testing.T) {
	s, _ := newTestStream(t, 1)
	produceValues(t, s, "0", "a", "b")
	tx := mustTx(t, s, "0")
	txProduce(t, tx, "c") // 2
	produceValues(t, s, "0", "d")
	if err := s.Trim("0", "100"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	r, err := s.Open(context.Background(), "0", brokers.Start{After: "1"})
	if err != nil {
		t.Fatalf("open after the last trimmed position: %v", err)
	}
	if got := fetchOnce(t, r, 10); !reflect.DeepEqual(got.values, []string{"c", "d"}) {
		t.Fatalf("after the trim: %v, want the transaction's records and what followed", got.values)
	}
}

// A commit wakes a reader waiting behind the transaction.
func TestCommitWakesFetch(t *testing.T) {
	s := mustStream(t, StreamConfig{})
	defer s.Close()
	tx := mustTx(t, s, "0")
	txProduce(t, tx, "a")
	res, el, err := fetchWhileWaiting(t, context.Background(), s, tx.Commit)
	if err != nil || !reflect.DeepEqual(valuesOf(res.Messages), []string{"a"}) {
		t.Fatalf("fetch = %v, %v", valuesOf(res.Messages), err)
	}
	if el > 10*time.Second {
		t.Fatalf("fetch took %v, want an early return on commit", el)
	}
}
