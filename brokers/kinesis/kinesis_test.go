package kinesis_test

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/brokertest"
	"github.com/drover-dev/drover/brokers/kinesis"
)

func values(prefix string, from, n int) []brokers.Message {
	out := make([]brokers.Message, n)
	for i := range out {
		out[i] = brokers.Message{Key: []byte(fmt.Sprintf("k-%d", from+i)), Value: []byte(fmt.Sprintf("%s-%d", prefix, from+i))}
	}
	return out
}

func open(t *testing.T, s *kinesis.Stream, shard string, start brokers.Start) *kinesis.Reader {
	t.Helper()
	return brokertest.Open(t, 10*time.Second, "open "+shard, func(ctx context.Context) (*kinesis.Reader, error) {
		return s.OpenReader(ctx, shard, start)
	})
}

// fetchN fetches until it has n records.
func fetchN(t *testing.T, r *kinesis.Reader, n int) []brokers.Message {
	t.Helper()
	ctx := brokertest.Context(t, 30*time.Second)
	var got []brokers.Message
	for len(got) < n {
		res, err := r.Fetch(ctx, n-len(got), time.Second)
		if err != nil {
			t.Fatalf("fetch after %d of %d: %v", len(got), n, err)
		}
		got = append(got, res.Messages...)
		if res.End && len(got) < n {
			t.Fatalf("shard ended after %d of %d records", len(got), n)
		}
	}
	return got
}

// TestFields: key (partition key), value (data), the producer's sequence
// numbers as positions, an arrival time, and Lag 0 with no Oldest once
// the reader is at the tip (MillisBehindLatest 0).
func TestFields(t *testing.T) {
	f := newHarness(t).newFixture(t, 1)
	s := f.open(t, f.config())
	ps, err := s.Partitions(brokertest.Context(t, 10*time.Second))
	if err != nil || len(ps) != 1 || len(ps[0].Parents) != 0 {
		t.Fatalf("partitions %+v, %v", ps, err)
	}
	before := time.Now().Add(-2 * time.Second)
	seqs, err := f.Produce(brokertest.Context(t, 10*time.Second), ps[0].ID, brokers.Message{Key: []byte("key-1"), Value: []byte(`{"id":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	r := open(t, s, ps[0].ID, brokers.Start{Mode: brokers.Earliest})
	res, err := r.Fetch(brokertest.Context(t, 10*time.Second), 10, 5*time.Second)
	if err != nil || len(res.Messages) != 1 {
		t.Fatalf("fetch %+v, %v", res, err)
	}
	m := res.Messages[0]
	if string(m.Key) != "key-1" || string(m.Value) != `{"id":1}` || m.Position != seqs[0] || m.ID != "" || len(m.Headers) != 0 {
		t.Fatalf("record %+v, want key-1, the value, position %s", m, seqs[0])
	}
	if m.Time.Before(before) || m.Time.After(time.Now().Add(2*time.Second)) {
		t.Fatalf("time %v is not the arrival time", m.Time)
	}
	if res.Lag != 0 || !res.Oldest.IsZero() {
		t.Fatalf("lag %d, oldest %v at the tip, want 0 and none (MillisBehindLatest 0)", res.Lag, res.Oldest)
	}
}

// TestPositionGone: a reader opened after a sequence number whose record
// the shard no longer holds fails with ErrPositionGone, not retryable.
// Kinesis trims only by retention (24 h at least), so the test makes such
// a number: the second record's with its arrival second one less (in
// kinesalite's layout of version-2 sequence numbers, the 9 hex digits
// above the lowest 9). It is a valid number of this shard, ordered between
// the first and second records, and no record has it: just what a trimmed
// checkpoint looks like to the reader.
func TestPositionGone(t *testing.T) {
	f := newHarness(t).newFixture(t, 1)
	s := f.open(t, f.config())
	ps, err := s.Partitions(brokertest.Context(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	seqs, err := f.Produce(brokertest.Context(t, 10*time.Second), ps[0].ID, values("m", 0, 3)...)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := new(big.Int).SetString(seqs[1], 10)
	missing := n.Sub(n, new(big.Int).Lsh(big.NewInt(1), 4*9)).String()
	if brokers.ComparePositions(missing, seqs[0]) <= 0 || brokers.ComparePositions(missing, seqs[1]) >= 0 {
		t.Fatalf("made-up position %s is not between %s and %s", missing, seqs[0], seqs[1])
	}

	r, err := s.OpenReader(brokertest.Context(t, 10*time.Second), ps[0].ID, brokers.Start{After: missing})
	if err == nil {
		defer r.Close()
		var res brokers.Result
		res, err = r.Fetch(brokertest.Context(t, 10*time.Second), 10, time.Second)
		if err == nil {
			t.Fatalf("reading after a position with no record returned %d records", len(res.Messages))
		}
	}
	if !errors.Is(err, brokers.ErrPositionGone) || brokers.Retryable(err) {
		t.Fatalf("after a missing position: %v (retryable %v), want non-retryable ErrPositionGone", err, brokers.Retryable(err))
	}
	// The same reader keeps failing; a reader after a held position reads on.
	if r != nil {
		if _, err := r.Fetch(brokertest.Context(t, 10*time.Second), 10, 0); !errors.Is(err, brokers.ErrPositionGone) {
			t.Fatalf("second fetch: %v, want ErrPositionGone again", err)
		}
	}
	got := fetchN(t, open(t, s, ps[0].ID, brokers.Start{After: seqs[0]}), 2)
	if got[0].Position != seqs[1] || got[1].Position != seqs[2] {
		t.Fatalf("after %s: %v", seqs[0], got)
	}
}

// TestSplitMergeMidStream reshards a stream while it is being read: shard
// 0 is split, then one child merged with shard 1. Readers in dependency
// order (a shard after each of its parents was read to its end, as drover
// does) return every record exactly once, each parent's records before its
// children's.
func TestSplitMergeMidStream(t *testing.T) {
	f := newHarness(t).newFixture(t, 2)
	s := f.open(t, f.config())
	ctx := brokertest.Context(t, 60*time.Second)
	ps, err := s.Partitions(ctx)
	if err != nil || len(ps) != 2 {
		t.Fatalf("partitions %+v, %v", ps, err)
	}
	s0, s1 := ps[0].ID, ps[1].ID
	produced := map[string]string{} // value -> shard
	produce := func(shard, prefix string, n int) {
		t.Helper()
		if _, err := f.Produce(ctx, shard, values(prefix, 0, n)...); err != nil {
			t.Fatalf("produce to %s: %v", shard, err)
		}
		for _, m := range values(prefix, 0, n) {
			produced[string(m.Value)] = shard
		}
	}
	produce(s0, "a0", 10)
	produce(s1, "a1", 10)

	// Readers of both shards are part-way through when the stream reshards.
	var consumed []string // values in the order the loop applied them
	from := map[string]string{}
	apply := func(shard string, ms []brokers.Message) {
		for _, m := range ms {
			consumed = append(consumed, string(m.Value))
			from[string(m.Value)] = shard
		}
	}
	readers := map[string]*kinesis.Reader{s0: open(t, s, s0, brokers.Start{}), s1: open(t, s, s1, brokers.Start{})}
	apply(s0, fetchN(t, readers[s0], 5))
	apply(s1, fetchN(t, readers[s1], 5))

	kids, err := f.Split(ctx, s0)
	if err != nil || len(kids) != 2 {
		t.Fatalf("split %s: %v %v", s0, kids, err)
	}
	produce(kids[0], "b0", 10)
	produce(kids[1], "b1", 10)
	produce(s1, "b2", 10)
	merged, err := f.Merge(ctx, kids[1], s1)
	if err != nil {
		t.Fatalf("merge %s %s: %v", kids[1], s1, err)
	}
	produce(kids[0], "c0", 10)
	produce(merged, "c1", 10)

	// Read in dependency order, as drover's supervisors do.
	parts, err := s.Partitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	parents := map[string][]string{}
	for _, p := range parts {
		parents[p.ID] = p.Parents
	}
	wantParents := map[string][]string{kids[0]: {s0}, kids[1]: {s0}, merged: {kids[1], s1}}
	for id, want := range wantParents {
		if fmt.Sprint(parents[id]) != fmt.Sprint(want) {
			t.Fatalf("shard %s parents %v, want %v (all: %+v)", id, parents[id], want, parts)
		}
	}
	finished := map[string]bool{}
	lastIndex := map[string]int{} // shard -> index in consumed of its last record
	firstIndex := map[string]int{}
	for progress := true; progress; {
		progress = false
		for _, p := range parts {
			if finished[p.ID] {
				continue
			}
			ready := true
			for _, parent := range p.Parents {
				ready = ready && finished[parent]
			}
			if !ready {
				continue
			}
			r := readers[p.ID]
			if r == nil {
				r = open(t, s, p.ID, brokers.Start{Mode: brokers.Earliest})
				readers[p.ID] = r
			}
			for {
				res, err := r.Fetch(ctx, 7, 500*time.Millisecond)
				if err != nil {
					t.Fatalf("fetch %s: %v", p.ID, err)
				}
				if len(res.Messages) > 0 {
					if _, ok := firstIndex[p.ID]; !ok {
						firstIndex[p.ID] = len(consumed)
					}
					apply(p.ID, res.Messages)
					lastIndex[p.ID] = len(consumed) - 1
				}
				if res.End || (len(res.Messages) == 0 && !closedShard(p.ID, parts)) {
					// A closed shard ends; an open child has nothing more
					// once an empty fetch comes back.
					break
				}
			}
			finished[p.ID] = true
			progress = true
		}
	}
	seen := map[string]int{}
	for _, v := range consumed {
		seen[v]++
	}
	for v, shard := range produced {
		if seen[v] != 1 {
			t.Fatalf("record %s (shard %s) consumed %d times", v, shard, seen[v])
		}
		if from[v] != shard {
			t.Fatalf("record %s produced to %s, read from %s", v, shard, from[v])
		}
	}
	if len(consumed) != len(produced) {
		t.Fatalf("consumed %d records, produced %d", len(consumed), len(produced))
	}
	for child, ps := range wantParents {
		for _, parent := range ps {
			if firstIndex[child] <= lastIndex[parent] {
				t.Fatalf("child %s's first record (at %d) came before parent %s's last (at %d)", child, firstIndex[child], parent, lastIndex[parent])
			}
		}
	}
}

// closedShard reports whether id is a parent of another shard.
func closedShard(id string, parts []brokers.Partition) bool {
	for _, p := range parts {
		for _, parent := range p.Parents {
			if parent == id {
				return true
			}
		}
	}
	return false
}
