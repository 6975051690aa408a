package kinesis_test

import (
	"context"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/brokertest"
	"github.com/drover-dev/drover/brokers/kinesis"
)

// readValues fetches from r until every value of want was read or the
// deadline passes, and returns the values read in order.
func readValues(t *testing.T, r *kinesis.Reader, want []brokers.Message) []string {
	t.Helper()
	ctx := brokertest.Context(t, 20*time.Second)
	missing := map[string]bool{}
	for _, m := range want {
		missing[string(m.Value)] = true
	}
	var got []string
	for len(missing) > 0 {
		res, err := r.Fetch(ctx, 100, 500*time.Millisecond)
		if err != nil {
			t.Fatalf("fetch after %v (still missing %d of %d): %v", got, len(missing), len(want), err)
		}
		for _, m := range res.Messages {
			got = append(got, string(m.Value))
			delete(missing, string(m.Value))
		}
	}
	return got
}

// checkRead fails unless got is want in order, each once, preceded only by
// values allowed by before.
func checkRead(t *testing.T, got []string, want []brokers.Message, before func(string) bool) {
	t.Helper()
	i := 0
	for i < len(got) && i < len(got)-len(want) && before(got[i]) {
		i++
	}
	rest := got[i:]
	if len(rest) != len(want) {
		t.Fatalf("read %v, want %d records after the start, then nothing else", got, len(want))
	}
	for j, m := range want {
		if rest[j] != string(m.Value) {
			t.Fatalf("read %v, want %s at %d", got, m.Value, i+j)
		}
	}
}

// waitServer waits until the emulator's clock reads at least t.
func waitServer(t *testing.T, f *fixture, t0 time.Time) {
	t.Helper()
	ctx := brokertest.Context(t, 15*time.Second)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		now, err := f.serverTime(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !now.Before(t0) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the emulator's clock did not reach %v: %v", t0, ctx.Err())
		case <-tick.C:
		}
	}
}

// TestResolve: Resolve(Latest) is a start at the server's time less a
// second (kinesalite sends a Date header); a reader opened there reads
// every record written after Resolve returned, the ones written between
// Resolve and Open included, and not the backlog older than the margin.
// Resolve(Earliest) reads everything. An unknown shard is
// ErrUnknownPartition.
func TestResolve(t *testing.T) {
	ctx := brokertest.Context(t, 60*time.Second)
	f, s, shard := oneShard(t, ctx)
	old := values("old", 0, 5)
	if _, err := f.Produce(ctx, shard, old...); err != nil {
		t.Fatal(err)
	}
	// The backlog is older than the margin once the server's clock (a
	// truncated second) is 3 s past the second it was written in.
	written, err := f.serverTime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitServer(t, f, written.Add(kinesis.ServerClockMargin+2*time.Second))

	before := time.Now()
	latest, err := s.Resolve(ctx, shard, brokers.Latest)
	after := time.Now()
	if err != nil {
		t.Fatalf("resolve latest: %v", err)
	}
	if latest.After != "" || latest.At.IsZero() || latest.At.After(after) ||
		latest.At.Before(before.Add(-kinesis.ServerClockMargin-time.Second)) {
		t.Fatalf("resolve latest = %+v, want At within a second before the server's time (called at %v)", latest, before)
	}
	// Written after Resolve, before the reader opens: none may be skipped.
	fresh := values("new", 0, 5)
	if _, err := f.Produce(ctx, shard, fresh...); err != nil {
		t.Fatal(err)
	}
	got := readValues(t, open(t, s, shard, latest), fresh)
	checkRead(t, got, fresh, func(string) bool { return false })

	earliest, err := s.Resolve(ctx, shard, brokers.Earliest)
	if err != nil || earliest != (brokers.Start{Mode: brokers.Earliest}) {
		t.Fatalf("resolve earliest = %+v, %v; want Start{Mode: Earliest}", earliest, err)
	}
	all := append(append([]brokers.Message(nil), old...), fresh...)
	got = readValues(t, open(t, s, shard, earliest), all)
	checkRead(t, got, all, func(string) bool { return false })

	_, err = s.Resolve(ctx, "shardId-000000000099", brokers.Latest)
	if !errors.Is(err, brokers.ErrUnknownPartition) {
		t.Fatalf("resolve of an unknown shard: %v, want ErrUnknownPartition", err)
	}
}

// TestStartAt: Start.At reads from the first record whose arrival time is
// at or after it (AT_TIMESTAMP on ApproximateArrivalTimestamp), from every
// record when it is older than them all, and, when it is later than the
// server's clock, every record written after Open.
func TestStartAt(t *testing.T) {
	ctx := brokertest.Context(t, 60*time.Second)
	f, s, shard := oneShard(t, ctx)

	// Nothing stamped at or after a recent time yet: the reader waits at
	// the tip and reads what comes.
	tip := open(t, s, shard, brokers.Start{At: time.Now().Add(-time.Second)})
	// Batches in separate calls until two records' arrival times are 2 ms
	// apart or more (the SDK may read a time back a millisecond early).
	var all []brokers.Message
	k := 0 // the first record of the later time
	for i := 0; k == 0; i++ {
		batch := values("b", 3*i, 3)
		if _, err := f.Produce(ctx, shard, batch...); err != nil {
			t.Fatal(err)
		}
		all = append(all, batch...)
		read := fetchN(t, open(t, s, shard, brokers.Start{Mode: brokers.Earliest}), len(all))
		for j := 1; j < len(read) && k == 0; j++ {
			if read[j].Time.Sub(read[j-1].Time) >= 2*time.Millisecond {
				k = j
			}
		}
		if i == 50 {
			t.Fatalf("50 calls stamped within 2 ms of each other: %v", read[0].Time)
		}
	}
	checkRead(t, readValues(t, tip, all), all, func(string) bool { return false })
	read := fetchN(t, open(t, s, shard, brokers.Start{Mode: brokers.Earliest}), len(all))

	// At the first record of a later arrival time.
	got := readValues(t, open(t, s, shard, brokers.Start{At: read[k].Time}), all[k:])
	checkRead(t, got, all[k:], func(string) bool { return false })

	// Before everything: every record.
	got = readValues(t, open(t, s, shard, brokers.Start{At: read[0].Time.Add(-time.Hour)}), all)
	checkRead(t, got, all, func(string) bool { return false })

	// Later than the server's clock: what is written after Open.
	future := open(t, s, shard, brokers.Start{At: time.Now().Add(time.Hour)})
	later := values("later", 0, 3)
	if _, err := f.Produce(ctx, shard, later...); err != nil {
		t.Fatal(err)
	}
	checkRead(t, readValues(t, future, later), later, func(string) bool { return false })
}

// TestStreamRecreated: a stream deleted and created again with the same
// shard ids. A reader opened after a sequence number of the old stream
// fails with ErrPositionUnknown, not retryable, naming the shard and the
// number (Kinesis: "did not come from this stream"); so does a reader
// opened before the recreation, whose first record then comes from the new
// stream (its number is before the new shard's first). Reading from the
// new stream's resolved starts returns what was written after the
// recreation.
func TestStreamRecreated(t *testing.T) {
	ctx := brokertest.Context(t, 60*time.Second)
	f, s, shard := oneShard(t, ctx)
	seqs, err := f.Produce(ctx, shard, values("old", 0, 3)...)
	if err != nil {
		t.Fatal(err)
	}
	stale := open(t, s, shard, brokers.Start{After: seqs[0]})

	if err := f.recreate(ctx); err != nil {
		t.Fatal(err)
	}
	fresh := values("new", 0, 3)
	if _, err := f.Produce(ctx, shard, fresh...); err != nil {
		t.Fatal(err)
	}

	unknown := func(what, pos string, err error) {
		t.Helper()
		if !errors.Is(err, brokers.ErrPositionUnknown) || brokers.Retryable(err) {
			t.Fatalf("%s: %v (retryable %v), want non-retryable ErrPositionUnknown", what, err, brokers.Retryable(err))
		}
		if !strings.Contains(err.Error(), shard) || !strings.Contains(err.Error(), pos) {
			t.Fatalf("%s: %q does not name shard %s and position %s", what, err, shard, pos)
		}
	}
	r, err := s.OpenReader(ctx, shard, brokers.Start{After: seqs[1]})
	if err == nil {
		defer r.Close()
		var res brokers.Result
		if res, err = r.Fetch(ctx, 10, time.Second); err == nil {
			t.Fatalf("reading after a position of the deleted stream returned %d records", len(res.Messages))
		}
	}
	unknown("open after a position of the deleted stream", seqs[1], err)

	_, err = stale.Fetch(ctx, 10, time.Second)
	unknown("fetch of a reader opened before the recreation", seqs[0], err)
	_, err = stale.Fetch(ctx, 10, 0)
	unknown("second fetch of that reader", seqs[0], err)

	earliest, err := s.Resolve(ctx, shard, brokers.Earliest)
	if err != nil {
		t.Fatal(err)
	}
	checkRead(t, readValues(t, open(t, s, shard, earliest), fresh), fresh, func(string) bool { return false })

	latest, err := s.Resolve(ctx, shard, brokers.Latest)
	if err != nil {
		t.Fatal(err)
	}
	more := values("more", 0, 3)
	if _, err := f.Produce(ctx, shard, more...); err != nil {
		t.Fatal(err)
	}
	got := readValues(t, open(t, s, shard, latest), more)
	// Records of the last second before Resolve may be read again.
	checkRead(t, got, more, func(v string) bool { return strings.HasPrefix(v, "new-") })
}

// TestPositionBeforeShard: a sequence number of the right form but before
// the shard's first one is not the shard's (ErrPositionUnknown), not a
// trimmed position: Kinesis accepts it and returns the shard's first
// record, and the shard's range tells the two apart.
func TestPositionBeforeShard(t *testing.T) {
	f := newHarness(t).newFixture(t, 1)
	s := f.open(t, f.config())
	ctx := brokertest.Context(t, 30*time.Second)
	sh, err := f.shards(ctx)
	if err != nil {
		t.Fatal(err)
	}
	shard := *sh[0].ShardId
	if _, err := f.Produce(ctx, shard, values("m", 0, 2)...); err != nil {
		t.Fatal(err)
	}
	// The shard's first number with its time field (kinesalite's layout,
	// see TestPositionGone) a second earlier.
	before := subSecond(t, *sh[0].SequenceNumberRange.StartingSequenceNumber)
	r := open(t, s, shard, brokers.Start{After: before})
	_, err = r.Fetch(ctx, 10, time.Second)
	if !errors.Is(err, brokers.ErrPositionUnknown) || brokers.Retryable(err) || !strings.Contains(err.Error(), before) {
		t.Fatalf("after a number before the shard's first: %v, want non-retryable ErrPositionUnknown naming %s", err, before)
	}
}

// subSecond is kinesalite sequence number seq with its time field one
// second less.
func subSecond(t *testing.T, seq string) string {
	t.Helper()
	n, ok := new(big.Int).SetString(seq, 10)
	if !ok {
		t.Fatalf("sequence number %q", seq)
	}
	return n.Sub(n, new(big.Int).Lsh(big.NewInt(1), 4*9)).String()
}

// oneShard opens a stream of one shard on a fresh fixture and returns the
// shard the adapter lists.
func oneShard(t *testing.T, ctx context.Context) (*fixture, *kinesis.Stream, string) {
	t.Helper()
	f := newHarness(t).newFixture(t, 1)
	s := f.open(t, f.config())
	ps, err := s.Partitions(ctx)
	if err != nil || len(ps) != 1 {
		t.Fatalf("partitions %+v, %v", ps, err)
	}
	return f, s, ps[0].ID
}
