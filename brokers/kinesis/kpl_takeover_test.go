package kinesis_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/actors/decode"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/brokertest"
	"github.com/drover-dev/drover/brokers/kinesis"
	"github.com/drover-dev/drover/internal/kinesistest"
	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/persistence/sqlite"
)

// kplStream is a shard carrying plain records and KPL aggregates, and the
// messages a reader must return for it, in order.
type kplStream struct {
	seqs []string          // the Kinesis records' sequence numbers, in order
	want []brokers.Message // Position, Key, Value, Headers, Reject ("corrupt" for the corrupt one)
}

// aggregate is an aggregate of n user records, keys and values named by
// prefix, every other one with an explicit hash key.
func aggregate(prefix string, n int) ([]byte, []brokers.Message) {
	recs := make([]kinesistest.UserRecord, n)
	want := make([]brokers.Message, n)
	for i := range recs {
		recs[i] = kinesistest.UserRecord{PartitionKey: fmt.Sprintf("%s-key-%d", prefix, i%3), Data: fmt.Appendf(nil, `{"id":"%s-%d"}`, prefix, i)}
		want[i] = brokers.Message{Key: []byte(recs[i].PartitionKey), Value: recs[i].Data}
		if i%2 == 1 {
			recs[i].ExplicitHashKey = fmt.Sprint(1000 + i)
			want[i].Headers = []brokers.Header{{Key: kinesis.HeaderExplicitHashKey, Value: []byte(recs[i].ExplicitHashKey)}}
		}
	}
	return kinesistest.Aggregate(recs...), want
}

// putKPL puts, in one call: plain p0, aggregate A1 (7 user records),
// plains p1 and p2, aggregate A2 (5), an aggregate whose checksum is
// wrong, and aggregate A3 (3).
func putKPL(t *testing.T, f *fixture, shard string) kplStream {
	t.Helper()
	a1, w1 := aggregate("a1", 7)
	a2, w2 := aggregate("a2", 5)
	a3, w3 := aggregate("a3", 3)
	bad, _ := aggregate("bad", 2)
	bad[len(bad)-1] ^= 0xff
	plain := func(v string) brokers.Message {
		return brokers.Message{Key: []byte("plain-" + v), Value: []byte(`{"id":"` + v + `"}`)}
	}
	recs := []brokers.Message{plain("p0"), {Key: []byte("agg-1"), Value: a1}, plain("p1"), plain("p2"),
		{Key: []byte("agg-2"), Value: a2}, {Key: []byte("agg-bad"), Value: bad}, {Key: []byte("agg-3"), Value: a3}}
	seqs, err := f.Produce(brokertest.Context(t, 10*time.Second), shard, recs...)
	if err != nil {
		t.Fatal(err)
	}
	var want []brokers.Message
	sub := func(seq string, ms []brokers.Message) {
		for i, m := range ms {
			m.Position = brokers.SubPosition(seq, i)
			want = append(want, m)
		}
	}
	at := func(i int) brokers.Message { m := recs[i]; m.Position = seqs[i]; return m }
	want = append(want, at(0))
	sub(seqs[1], w1)
	want = append(want, at(2), at(3))
	sub(seqs[4], w2)
	c := at(5)
	c.Reject = "corrupt"
	want = append(want, c)
	sub(seqs[6], w3)
	return kplStream{seqs: seqs, want: want}
}

// sameMessage compares what a reader returned with what was put (a
// rejected message by whether it is rejected: its reason is checked apart).
func sameMessage(got, want brokers.Message) bool {
	return got.Position == want.Position && string(got.Key) == string(want.Key) && string(got.Value) == string(want.Value) &&
		slices.EqualFunc(got.Headers, want.Headers, func(a, b brokers.Header) bool { return a.Key == b.Key && string(a.Value) == string(b.Value) }) &&
		(got.Reject != "") == (want.Reject != "") && !got.Time.IsZero()
}

// TestKPLRead: a reader returns an aggregate's user records at
// sub-positions with their own keys and explicit hash keys, at most max at
// a time, counting the ones it holds back as lag; a corrupt aggregate is
// one message rejected with the reason; a start after a sub-position, or
// after an aggregate's plain sequence number (a checkpoint written before
// drover de-aggregated), resumes right after it.
func TestKPLRead(t *testing.T) {
	f := newHarness(t).newFixture(t, 1)
	s := f.open(t, f.config())
	shard := singleShard(t, s)
	k := putKPL(t, f, shard)

	r := open(t, s, shard, brokers.Start{Mode: brokers.Earliest})
	ctx := brokertest.Context(t, 30*time.Second)
	var got []brokers.Message
	for len(got) < len(k.want) {
		res, err := r.Fetch(ctx, 4, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Messages) > 4 {
			t.Fatalf("fetch of 4 returned %d", len(res.Messages))
		}
		got = append(got, res.Messages...)
		// The rest of an aggregate taken is held back, counted as lag
		// (kinesalite says every shard is caught up: MillisBehindLatest 0).
		held := 0
		if n := len(got); n > 0 && n < len(k.want) {
			seq, _ := brokers.SplitPosition(got[n-1].Position)
			for _, w := range k.want[n:] {
				if p, sub := brokers.SplitPosition(w.Position); p != seq || sub < 0 {
					break
				}
				held++
			}
		}
		if len(res.Messages) > 0 && (res.Lag < int64(held) || held > 0 && res.Oldest.IsZero()) {
			t.Errorf("after %d messages lag = %d, oldest %v, want at least the %d user records held back, and their time", len(got), res.Lag, res.Oldest, held)
		}
	}
	for i := range k.want {
		if !sameMessage(got[i], k.want[i]) {
			t.Errorf("message %d = %+v, want %+v", i, got[i], k.want[i])
		}
		if w := k.want[i]; w.Reject != "" && !strings.Contains(got[i].Reject, "MD5 checksum mismatch") {
			t.Errorf("corrupt aggregate rejected with %q, want the checksum named", got[i].Reject)
		}
	}

	for _, tt := range []struct {
		name  string
		after string
		first int // index in want of the first message returned
	}{
		{"inside an aggregate", brokers.SubPosition(k.seqs[1], 2), 4},
		{"at an aggregate's last user record", brokers.SubPosition(k.seqs[1], 6), 8},
		{"an aggregate's plain sequence number", k.seqs[1], 8},
		{"a plain record before an aggregate", k.seqs[0], 1},
		{"the last aggregate's last user record", brokers.SubPosition(k.seqs[6], 2), len(k.want)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := open(t, s, shard, brokers.Start{After: tt.after})
			if tt.first == len(k.want) {
				res, err := r.Fetch(ctx, 10, 500*time.Millisecond)
				if err != nil || len(res.Messages) != 0 {
					t.Fatalf("after the end: %d messages, %v", len(res.Messages), err)
				}
				return
			}
			got := fetchN(t, r, len(k.want)-tt.first)
			for i, m := range got {
				if !sameMessage(m, k.want[tt.first+i]) {
					t.Fatalf("message %d after %s = %s, want %s", i, tt.after, m.Position, k.want[tt.first+i].Position)
				}
			}
		})
	}
}

// TestKPLSeek: seeks on a shard of aggregates (brokers.SeekStart, as
// drover seek runs them): after a sub-position, to a user record inside
// an aggregate (read first after the one before it), to a time (the
// "@at:" marker, AT_TIMESTAMP: the aggregate arrived after it is read
// whole); a seek to an aggregate's first user record itself is refused,
// as one to a plain sequence number is.
func TestKPLSeek(t *testing.T) {
	f := newHarness(t).newFixture(t, 1)
	s := f.open(t, f.config())
	shard := singleShard(t, s)
	k := putKPL(t, f, shard)
	ctx := brokertest.Context(t, 30*time.Second)
	all := fetchN(t, open(t, s, shard, brokers.Start{Mode: brokers.Earliest}), len(k.want))
	for _, tt := range []struct {
		to    string
		first int
	}{
		{"after:" + k.want[3].Position, 4},
		{k.want[3].Position, 3},
		{"after:" + k.seqs[1], 8},
		{all[0].Time.Add(-time.Hour).UTC().Format(time.RFC3339Nano), 0},
	} {
		target, err := brokers.ParseSeekTarget(tt.to)
		if err != nil {
			t.Fatal(err)
		}
		st, err := brokers.SeekStart(ctx, s, shard, target)
		if err != nil {
			t.Fatalf("seek %s: %v", tt.to, err)
		}
		back, ok := brokers.ParseStart(brokers.StartPosition(st))
		if !ok {
			t.Fatalf("seek %s: checkpoint %q does not parse", tt.to, brokers.StartPosition(st))
		}
		got := fetchN(t, open(t, s, shard, back), len(k.want)-tt.first)
		if got[0].Position != k.want[tt.first].Position {
			t.Errorf("seek %s: first read %s, want %s", tt.to, got[0].Position, k.want[tt.first].Position)
		}
	}
	if _, err := brokers.SeekStart(ctx, s, shard, brokers.SeekTarget{From: k.want[1].Position}); !errors.Is(err, brokers.ErrBadSeek) {
		t.Fatalf("seek to an aggregate's first user record: %v, want ErrBadSeek", err)
	}
}

func singleShard(t *testing.T, s *kinesis.Stream) string {
	t.Helper()
	ps, err := s.Partitions(brokertest.Context(t, 10*time.Second))
	if err != nil || len(ps) != 1 {
		t.Fatalf("partitions %+v, %v", ps, err)
	}
	return ps[0].ID
}

// consumer is one owner of the unit, as the runtime's unit is: lease,
// checkpoint, fetch batch_size, decode, one fenced apply with the
// checkpoint.
type consumer struct {
	t     *testing.T
	st    *sqlite.Store
	s     *kinesis.Stream
	owner string
	lease persistence.Lease
	r     *kinesis.Reader
}

const kplUnit = "kpl/0"

func takeOver(t *testing.T, st *sqlite.Store, s *kinesis.Stream, shard, owner string) *consumer {
	t.Helper()
	ctx := brokertest.Context(t, 10*time.Second)
	l, err := st.Acquire(ctx, persistence.AcquireRequest{Unit: kplUnit, Owner: owner, TTL: time.Minute, Live: []string{owner}})
	if err != nil {
		t.Fatalf("%s: acquire: %v", owner, err)
	}
	start := brokers.Start{Mode: brokers.Earliest}
	if cp, err := st.Checkpoint(ctx, kplUnit); err == nil {
		start, _ = brokers.ParseStart(cp.Position)
	} else if !errors.Is(err, persistence.ErrNotFound) {
		t.Fatal(err)
	}
	return &consumer{t: t, st: st, s: s, owner: owner, lease: l, r: open(t, s, shard, start)}
}

// fetch is one fetch of up to batch messages.
func (c *consumer) fetch(batch int) []brokers.Message {
	c.t.Helper()
	res, err := c.r.Fetch(brokertest.Context(c.t, 30*time.Second), batch, 2*time.Second)
	if err != nil {
		c.t.Fatalf("%s: fetch: %v", c.owner, err)
	}
	return res.Messages
}

// apply decodes msgs in handler mode and applies them with their last
// position as checkpoint; the handler appends the user records to
// *applied, which the test keeps only when the transaction commits.
func (c *consumer) apply(msgs []brokers.Message, applied *[]string) error {
	var b persistence.Batch
	b = persistence.Batch{Source: "kpl", Unit: kplUnit, Lease: c.lease, Table: "kpl", Checkpoint: msgs[len(msgs)-1].Position}
	for _, m := range msgs {
		b.Ops = append(b.Ops, decode.Config{}.Raw(m))
	}
	var mine []string
	b.Handle = func(_ context.Context, _ persistence.Tx, ops []persistence.Op) error {
		for _, op := range ops {
			mine = append(mine, op.Position+" "+string(op.Payload))
		}
		return nil
	}
	if _, err := c.st.Apply(brokertest.Context(c.t, 10*time.Second), &b); err != nil {
		return err
	}
	*applied = append(*applied, mine...)
	return nil
}

// TestKPLTakeoverMidAggregate: the acceptance test of issue 14 item 3.
// A shard carries plain records and aggregates; the unit is applied with
// batch_size 3, smaller than the aggregates. Its first owner loses its
// lease after applying part of aggregate A1 (its checkpoint is a
// sub-position inside A1) with the next batch fetched: that batch is
// fenced off. The second owner, a new process (a stream of its own),
// resumes inside A1 and is gone after applying part of A2. The third reads
// to the end. Every user record is applied exactly once, in order, and the
// corrupt aggregate is one dead letter with its reason.
func TestKPLTakeoverMidAggregate(t *testing.T) {
	f := newHarness(t).newFixture(t, 1)
	st, err := sqlite.Open(brokertest.Context(t, 10*time.Second), filepath.Join(t.TempDir(), "kpl.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	s1 := f.open(t, f.config())
	shard := singleShard(t, s1)
	k := putKPL(t, f, shard)
	var applied []string

	const batch = 3
	// inside reports whether the checkpoint is a sub-position with user
	// records of its aggregate still to apply.
	inside := func(want int) {
		t.Helper()
		cp, err := st.Checkpoint(brokertest.Context(t, 10*time.Second), kplUnit)
		if err != nil {
			t.Fatal(err)
		}
		if cp.Position != k.want[want-1].Position || !strings.Contains(cp.Position, "/") ||
			!strings.Contains(k.want[want].Position, "/") || strings.Split(cp.Position, "/")[0] != strings.Split(k.want[want].Position, "/")[0] {
			t.Fatalf("checkpoint %s after %d applied is not inside an aggregate (next %s)", cp.Position, want, k.want[want].Position)
		}
	}

	a := takeOver(t, st, s1, shard, "node-a")
	for range 2 {
		if err := a.apply(a.fetch(batch), &applied); err != nil {
			t.Fatalf("node-a: %v", err)
		}
	}
	inside(6) // p0, A1/0..4 applied
	inflight := a.fetch(batch)

	s2 := f.open(t, f.config()) // node-b: another process
	b := takeOver(t, st, s2, shard, "node-b")
	if err := a.apply(inflight, &applied); !errors.Is(err, persistence.ErrLeaseLost) {
		t.Fatalf("node-a applied after the takeover: %v, want ErrLeaseLost", err)
	}
	a.r.Close()
	for range 2 {
		if err := b.apply(b.fetch(batch), &applied); err != nil {
			t.Fatalf("node-b: %v", err)
		}
	}
	inside(12) // ... A1/5, A1/6, p1, p2, A2/0, A2/1 applied
	b.fetch(batch)
	s2.Close() // node-b is gone with a batch fetched and not applied

	c := takeOver(t, st, f.open(t, f.config()), shard, "node-c")
	for len(applied) < len(k.want)-1 { // the corrupt aggregate is a dead letter, not handled
		msgs := c.fetch(batch)
		if len(msgs) == 0 {
			t.Fatalf("node-c: no more messages after %d applied", len(applied))
		}
		if err := c.apply(msgs, &applied); err != nil {
			t.Fatalf("node-c: %v", err)
		}
	}
	if msgs := c.fetch(batch); len(msgs) != 0 {
		t.Fatalf("node-c: %d messages after the last one", len(msgs))
	}

	var want []string
	var bad brokers.Message
	for _, m := range k.want {
		if m.Reject != "" {
			bad = m
			continue
		}
		want = append(want, m.Position+" "+string(m.Value))
	}
	if !slices.Equal(applied, want) {
		t.Errorf("applied, in order:\n%s\nwant each user record once, in order:\n%s", strings.Join(applied, "\n"), strings.Join(want, "\n"))
	}
	dls, err := st.DeadLetters(brokertest.Context(t, 10*time.Second), persistence.DeadLetterFilter{Source: "kpl"})
	if err != nil {
		t.Fatal(err)
	}
	if len(dls) != 1 || dls[0].Position != bad.Position || !strings.Contains(dls[0].Reason, "KPL aggregate: MD5 checksum mismatch") ||
		string(dls[0].Payload) != string(bad.Value) || dls[0].MsgKey != string(bad.Key) {
		t.Errorf("dead letters %+v, want the corrupt aggregate at %s, whole, with its reason", dls, bad.Position)
	}
}
