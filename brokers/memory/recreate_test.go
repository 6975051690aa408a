package memory

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/brokers"
)

func partitionIDs(t *testing.T, s brokers.Stream) map[string][]string {
	t.Helper()
	ps, err := s.Partitions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string][]string, len(ps))
	for _, p := range ps {
		out[p.ID] = append([]string{}, p.Parents...)
	}
	return out
}

func TestRecreate(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestStream(t, 2)
	produceN(t, s, "1", 5)
	if _, err := s.Split("0"); err != nil { // 0 closed; 2, 3 open
		t.Fatal(err)
	}
	produceN(t, s, "3", 1)
	client := s.NewClient()
	r1, _ := client.Open(ctx, "1", brokers.Start{})
	if got := fetchOnce(t, r1, 2); len(got.values) != 2 {
		t.Fatalf("before: %+v", got)
	}
	r3, _ := s.Open(ctx, "3", brokers.Start{})
	tx := mustTx(t, s, "1")
	txProduce(t, tx, "t")
	idle := mustTx(t, s, "2") // wrote nothing yet

	if err := s.Recreate(); err != nil {
		t.Fatal(err)
	}
	// As many open partitions as before, "0".."n-1", no parents, empty.
	if got, want := partitionIDs(t, s), map[string][]string{"0": {}, "1": {}, "2": {}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("partitions after recreate = %v, want %v", got, want)
	}
	for _, id := range []string{"0", "1", "2"} {
		if got, err := s.Resolve(ctx, id, brokers.Latest); err != nil || got != (brokers.Start{Mode: brokers.Earliest}) {
			t.Fatalf("partition %s latest = %+v, %v; want an empty partition", id, got, err)
		}
	}
	if got := produceValues(t, s, "1", "new"); !reflect.DeepEqual(got, []string{"0"}) {
		t.Fatalf("offsets after recreate = %v, want to restart at 0", got)
	}

	// Readers of the old incarnation fail for good.
	_, err := r1.Fetch(ctx, 10, 0)
	var be *brokers.Error
	if !errors.Is(err, brokers.ErrPositionUnknown) || brokers.Retryable(err) || !errors.As(err, &be) {
		t.Fatalf("old reader of 1: %v, want a non-retryable *brokers.Error with ErrPositionUnknown", err)
	}
	if _, err := r3.Fetch(ctx, 10, 0); !errors.Is(err, brokers.ErrUnknownPartition) || brokers.Retryable(err) {
		t.Fatalf("old reader of 3 (not in the new stream): %v, want non-retryable ErrUnknownPartition", err)
	}
	// Its open transactions are aborted.
	if _, err := tx.Produce(brokers.Message{}); !errors.Is(err, ErrTxDone) {
		t.Fatalf("produce in a transaction of the old stream: %v, want ErrTxDone", err)
	}
	if _, err := idle.Produce(brokers.Message{}); !errors.Is(err, ErrTxDone) || !strings.Contains(err.Error(), "recreated") {
		t.Fatalf("produce in an idle transaction of the old stream: %v, want ErrTxDone naming the recreation", err)
	}
	// A new Open after an old position beyond the new end fails; one below
	// the new end cannot be told from a new one (as on Kafka without topic
	// ids) and reads on.
	if _, err := client.Open(ctx, "1", brokers.Start{After: "1"}); !errors.Is(err, brokers.ErrPositionUnknown) || brokers.Retryable(err) {
		t.Fatalf("open after an old position beyond the new end: %v", err)
	}
	r, err := client.Open(ctx, "1", brokers.Start{After: "0"})
	if err != nil {
		t.Fatal(err)
	}
	if got := fetchOnce(t, r, 10); len(got.values) != 0 {
		t.Fatalf("after 0 in the new stream: %v", got.values)
	}
	r, _ = client.Open(ctx, "1", brokers.Start{Mode: brokers.Earliest})
	if got := fetchOnce(t, r, 10); !reflect.DeepEqual(got.values, []string{"new"}) {
		t.Fatalf("earliest in the new stream: %v", got.values)
	}
	// New partitions go on from the new ids.
	if ids, err := s.AddPartitions(1); err != nil || !reflect.DeepEqual(ids, []string{"3"}) {
		t.Fatalf("add after recreate = %v, %v", ids, err)
	}
	_ = s.Close()
	if err := s.Recreate(); !errors.Is(err, brokers.ErrClosed) {
		t.Fatalf("recreate of a closed stream: %v", err)
	}
}

// A reader waiting when the stream is recreated returns at once with the
// error, not after its wait.
func TestRecreateWakesFetch(t *testing.T) {
	s := mustStream(t, StreamConfig{})
	defer s.Close()
	_, el, err := fetchWhileWaiting(t, context.Background(), s, s.Recreate)
	if !errors.Is(err, brokers.ErrPositionUnknown) {
		t.Fatalf("waiting fetch: %v, want ErrPositionUnknown", err)
	}
	if el > 10*time.Second {
		t.Fatalf("fetch took %v", el)
	}
}

func TestForget(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestStream(t, 1)
	produceN(t, s, "0", 3)
	done, _ := s.Open(ctx, "0", brokers.Start{})
	if got := fetchOnce(t, done, 10); len(got.values) != 3 {
		t.Fatalf("read all: %+v", got)
	}
	behind, _ := s.Open(ctx, "0", brokers.Start{})
	if got := fetchOnce(t, behind, 1); len(got.values) != 1 {
		t.Fatalf("read one: %+v", got)
	}
	kids, err := s.Split("0")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Forget(kids[0]); err == nil {
		t.Fatal("an open partition was forgotten")
	}
	if err := s.Forget("0"); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{kids[0]: {"0"}, kids[1]: {"0"}}
	if got := partitionIDs(t, s); !reflect.DeepEqual(got, want) {
		t.Fatalf("partitions = %v, want %v (children still name their parent)", got, want)
	}
	if got := partitionIDs(t, s.NewClient()); !reflect.DeepEqual(got, want) {
		t.Fatalf("client partitions = %v, want %v", got, want)
	}
	// A reader that had read everything sees the end; one that had not
	// lost the rest with the partition.
	if res, err := done.Fetch(ctx, 10, 0); err != nil || !res.End || len(res.Messages) != 0 {
		t.Fatalf("drained reader = %+v, %v; want End", res, err)
	}
	if _, err := behind.Fetch(ctx, 10, 0); !errors.Is(err, brokers.ErrPositionGone) || brokers.Retryable(err) {
		t.Fatalf("reader behind: %v, want non-retryable ErrPositionGone", err)
	}
	for name, err := range map[string]error{
		"open":    func() error { _, err := s.Open(ctx, "0", brokers.Start{}); return err }(),
		"resolve": func() error { _, err := s.Resolve(ctx, "0", brokers.Earliest); return err }(),
		"produce": func() error { _, err := s.Produce("0", brokers.Message{}); return err }(),
		"trim":    s.Trim("0", "1"),
		"forget":  s.Forget("0"),
		"split":   func() error { _, err := s.Split("0"); return err }(),
	} {
		if !errors.Is(err, brokers.ErrUnknownPartition) {
			t.Errorf("%s of a forgotten partition: %v, want ErrUnknownPartition", name, err)
		}
	}
	if ids, err := s.AddPartitions(1); err != nil || !reflect.DeepEqual(ids, []string{"3"}) {
		t.Fatalf("add after forget = %v, %v; ids must not be reused", ids, err)
	}
	if err := s.Forget("7"); !errors.Is(err, brokers.ErrUnknownPartition) {
		t.Fatalf("forget of an unknown partition: %v", err)
	}
}

// Partitions are found by their index (no map by id is kept): an id that
// parses to an index but is not that index's name is unknown.
func TestStreamKnowsOnlyItsOwnPartitionNames(t *testing.T) {
	ctx := context.Background()
	s, err := NewStream(StreamConfig{Partitions: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"01", "+1", "-0", " 1", "1 ", "3", "-1", "x", ""} {
		if _, err := s.Open(ctx, id, brokers.Start{}); !errors.Is(err, brokers.ErrUnknownPartition) {
			t.Errorf("open %q: %v, want ErrUnknownPartition", id, err)
		}
	}
	for _, id := range []string{"0", "1", "2"} {
		r, err := s.Open(ctx, id, brokers.Start{})
		if err != nil {
			t.Fatalf("open %q: %v", id, err)
		}
		_ = r.Close()
	}
}
