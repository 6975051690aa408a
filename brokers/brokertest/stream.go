package brokertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/drover-dev/drover/brokers"
)

// Stream definition names.
const (
	StreamOrder            = "order-within-partition"
	StreamFields           = "fields-carried"
	StreamReopen           = "reopen-after-position"
	StreamStart            = "start-earliest-latest"
	StreamUnknownPartition = "unknown-partition"
	StreamMaxWait          = "fetch-waits-at-most-max-wait"
	StreamEarlyReturn      = "fetch-returns-early-when-data-arrives"
	StreamCancel           = "fetch-returns-when-cancelled"
	StreamClose            = "close-releases-everything"
	StreamDiscovery        = "partition-discovery"
	StreamPositionGone     = "position-gone"
	StreamReshardEnd       = "reshard-end"
	StreamServerRestart    = "server-restart"
	StreamConnectionLoss   = "connection-loss"
)

var streamDefs = []streamDef{
	{Definition{Name: StreamOrder, Doc: "messages of a partition come back in produce order with increasing positions equal to those the producer got; partitions do not mix"}, streamOrder},
	{Definition{Name: StreamFields, Doc: "key, value, headers (in order) and a timestamp are carried through"}, streamFields},
	{Definition{Name: StreamTraceContext, Doc: traceDoc}, streamTraceContext},
	{Definition{Name: StreamReopen, Doc: "a reader opened after a position returns exactly the messages after it"}, streamReopen},
	{Definition{Name: StreamStart, Doc: "Earliest starts at the oldest message; Latest at the end as of Open, returning only later messages"}, streamStart},
	{Definition{Name: StreamUnknownPartition, Doc: "Open of a partition the stream lacks fails with ErrUnknownPartition, not retryable"}, streamUnknownPartition},
	{Definition{Name: StreamMaxWait, Doc: "an empty fetch waits about max_wait and no longer; wait 0 returns at once"}, streamMaxWait},
	{Definition{Name: StreamEarlyReturn, Doc: "a fetch waiting 60 s returns soon after a message is produced"}, streamEarlyReturn},
	{Definition{Name: StreamCancel, Doc: "a waiting fetch returns ctx.Err() promptly when its context is cancelled, and the reader then goes on without loss"}, streamCancel},
	{Definition{Name: StreamClose, Doc: "Stream.Close ends a fetch in flight with ErrClosed, later calls fail with ErrClosed, and no goroutine is left (goleak)"}, streamClose},
	{Definition{Name: StreamDiscovery, Doc: "Partitions sees a partition added while the stream is open, and it can be read", Needs: []Capability{CanAddPartitions}}, streamDiscovery},
	{Definition{Name: StreamPositionGone, Doc: "reading after a position the broker deleted fails with ErrPositionGone, not retryable", Needs: []Capability{CanTrim}}, streamPositionGone},
	{Definition{Name: StreamReshardEnd, Doc: "after a split the parent's reader gets its remaining messages then End; Partitions names the parent of each child", Needs: []Capability{CanReshard}}, streamReshardEnd},
	{Definition{Name: StreamServerRestart, Doc: "with the server down, Partitions fails with a retryable error and Fetch returns in time with nothing or a retryable error; after it is back the same reader goes on without loss or duplicates", Needs: []Capability{CanRestartServer}}, streamServerRestart},
	{Definition{Name: StreamConnectionLoss, Doc: "after the server drops every connection, the same reader goes on without loss or duplicates (errors, if any, retryable)", Needs: []Capability{CanCutConnections}}, streamConnectionLoss},
}

// newStream makes a fixture, checks its capabilities, opens the adapter and
// lists its partitions.
func newStream(t *testing.T, h StreamHarness, partitions int, needs ...Capability) (StreamFixture, brokers.Stream, []string) {
	t.Helper()
	f := h.NewStream(t, partitions)
	requireCaps(t, f, needs)
	s := f.Open(t)
	t.Cleanup(func() { _ = s.Close() })
	ps, err := s.Partitions(Context(t, opTimeout))
	if err != nil {
		t.Fatalf("partitions: %v", err)
	}
	if len(ps) != partitions {
		t.Fatalf("partitions = %+v, want %d", ps, partitions)
	}
	ids := make([]string, len(ps))
	for i, p := range ps {
		ids[i] = p.ID
	}
	return f, s, ids
}

func produce(t *testing.T, f StreamFixture, partition string, msgs ...brokers.Message) []string {
	t.Helper()
	pos, err := f.Produce(Context(t, opTimeout), partition, msgs...)
	if err != nil {
		t.Fatalf("produce to %s: %v", partition, err)
	}
	if len(pos) != len(msgs) {
		t.Fatalf("produce returned %d positions for %d messages", len(pos), len(msgs))
	}
	return pos
}

func openReader(t *testing.T, s brokers.Stream, partition string, start brokers.Start) brokers.Reader {
	t.Helper()
	r, err := s.Open(Context(t, opTimeout), partition, start)
	if err != nil {
		t.Fatalf("open %s %+v: %v", partition, start, err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

var earliest = brokers.Start{Mode: brokers.Earliest}

func streamOrder(t *testing.T, h StreamHarness) {
	f, s, ids := newStream(t, h, 2)
	p0, p1 := ids[0], ids[1]
	var want0 []string
	for batch := range 3 {
		want0 = append(want0, produce(t, f, p0, numbered("a", batch*50, 50)...)...)
		produce(t, f, p1, numbered("b", batch*10, 10)...)
	}
	got := fetchN(t, openReader(t, s, p0, earliest), 150, readTimeout, false)
	if !slices.Equal(values(got), wantValues("a", 0, 150)) {
		t.Fatalf("partition %s values = %v", p0, values(got))
	}
	for i, m := range got {
		if m.Position != want0[i] {
			t.Fatalf("message %d position %q, producer got %q", i, m.Position, want0[i])
		}
	}
	checkPositionsIncrease(t, got)
	got = fetchN(t, openReader(t, s, p1, earliest), 30, readTimeout, false)
	if !slices.Equal(values(got), wantValues("b", 0, 30)) {
		t.Fatalf("partition %s values = %v", p1, values(got))
	}
}

func streamFields(t *testing.T, h StreamHarness) {
	f, s, ids := newStream(t, h, 1)
	in := []brokers.Message{
		{Key: []byte("key-1"), Value: []byte(`{"id":1}`), Headers: []brokers.Header{{Key: "h1", Value: []byte("x")}, {Key: "h2", Value: []byte("y")}, {Key: "h1", Value: []byte("z")}}},
		{Value: []byte("no key")},
	}
	produce(t, f, ids[0], in...)
	got := fetchN(t, openReader(t, s, ids[0], earliest), 2, readTimeout, false)
	m := got[0]
	if string(m.Key) != "key-1" || string(m.Value) != `{"id":1}` || m.Tombstone {
		t.Fatalf("message = %+v", m)
	}
	if len(m.Headers) != 3 {
		t.Fatalf("headers = %+v, want 3", m.Headers)
	}
	for i, want := range in[0].Headers {
		if m.Headers[i].Key != want.Key || string(m.Headers[i].Value) != string(want.Value) {
			t.Fatalf("header %d = %s=%q, want %s=%q", i, m.Headers[i].Key, m.Headers[i].Value, want.Key, want.Value)
		}
	}
	if m.Time.IsZero() {
		t.Fatal("message has no timestamp")
	}
	if len(got[1].Key) != 0 || string(got[1].Value) != "no key" {
		t.Fatalf("keyless message = %+v", got[1])
	}
}

func streamReopen(t *testing.T, h StreamHarness) {
	f, s, ids := newStream(t, h, 1)
	p := ids[0]
	pos := produce(t, f, p, numbered("m", 0, 20)...)
	all := fetchN(t, openReader(t, s, p, earliest), 20, readTimeout, false)
	for _, k := range []int{0, 9, 18} {
		after := all[k].Position
		got := fetchN(t, openReader(t, s, p, brokers.Start{After: after}), 19-k, readTimeout, false)
		if !slices.Equal(values(got), wantValues("m", k+1, 19-k)) {
			t.Fatalf("after %s (message %d): %v", after, k, values(got))
		}
		if got[0].Position != pos[k+1] {
			t.Fatalf("after %s: first position %s, want %s", after, got[0].Position, pos[k+1])
		}
	}
	// After the last position there is nothing until something new comes.
	r := openReader(t, s, p, brokers.Start{After: pos[19]})
	expectNothing(t, r, 500*time.Millisecond)
	produce(t, f, p, numbered("m", 20, 1)...)
	if got := fetchN(t, r, 1, readTimeout, false); values(got)[0] != "m-20" {
		t.Fatalf("after the last position got %v", values(got))
	}
}

func streamStart(t *testing.T, h StreamHarness) {
	f, s, ids := newStream(t, h, 1)
	p := ids[0]
	produce(t, f, p, numbered("m", 0, 5)...)
	if got := fetchN(t, openReader(t, s, p, earliest), 5, readTimeout, false); !slices.Equal(values(got), wantValues("m", 0, 5)) {
		t.Fatalf("earliest: %v", values(got))
	}
	latest := openReader(t, s, p, brokers.Start{Mode: brokers.Latest})
	expectNothing(t, latest, 500*time.Millisecond)
	produce(t, f, p, numbered("m", 5, 2)...)
	if got := fetchN(t, latest, 2, readTimeout, false); !slices.Equal(values(got), wantValues("m", 5, 2)) {
		t.Fatalf("latest: %v", values(got))
	}
	expectNothing(t, latest, 200*time.Millisecond)
}

func streamUnknownPartition(t *testing.T, h StreamHarness) {
	_, s, _ := newStream(t, h, 1)
	r, err := s.Open(Context(t, opTimeout), "977", earliest)
	if err == nil {
		_ = r.Close()
		t.Fatal("open of a partition the stream lacks succeeded")
	}
	if !errors.Is(err, brokers.ErrUnknownPartition) || brokers.Retryable(err) {
		t.Fatalf("open: %v (retryable %v), want non-retryable ErrUnknownPartition", err, brokers.Retryable(err))
	}
}

func streamMaxWait(t *testing.T, h StreamHarness) {
	_, s, ids := newStream(t, h, 1)
	checkMaxWait(t, "fetch", openReader(t, s, ids[0], earliest).Fetch)
}

func streamEarlyReturn(t *testing.T, h StreamHarness) {
	f, s, ids := newStream(t, h, 1)
	r := openReader(t, s, ids[0], earliest)
	expectNothing(t, r, 100*time.Millisecond) // connected and positioned
	var (
		res brokers.Result
		err error
	)
	start := time.Now()
	done := async(func() { res, err = r.Fetch(Context(t, time.Minute+opTimeout), 10, time.Minute) })
	mustStillRun(t, done, "a fetch on an empty partition")
	produce(t, f, ids[0], numbered("m", 0, 1)...)
	waitDone(t, done, 10*time.Second, "a fetch after a message was produced")
	if err != nil || !slices.Equal(values(res.Messages), []string{"m-0"}) {
		t.Fatalf("fetch = %v, %v after %v", values(res.Messages), err, time.Since(start))
	}
}

func streamCancel(t *testing.T, h StreamHarness) {
	f, s, ids := newStream(t, h, 1)
	r := openReader(t, s, ids[0], earliest)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var err error
	done := async(func() { _, err = r.Fetch(ctx, 10, time.Minute) })
	mustStillRun(t, done, "a fetch on an empty partition")
	cancel()
	waitDone(t, done, prompt, "a cancelled fetch")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled fetch: %v, want context.Canceled", err)
	}
	produce(t, f, ids[0], numbered("m", 0, 3)...)
	if got := fetchN(t, r, 3, readTimeout, false); !slices.Equal(values(got), wantValues("m", 0, 3)) {
		t.Fatalf("after a cancelled fetch: %v", values(got))
	}
}

func streamClose(t *testing.T, h StreamHarness) {
	// A first instance lists the partitions and the fixture's own client
	// produces, so that the harness's goroutines exist before the snapshot.
	f, first, ids := newStream(t, h, 2)
	produce(t, f, ids[0], numbered("m", 0, 2)...)
	if err := first.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	ignore := goleak.IgnoreCurrent()

	s := f.Open(t)
	ps, err := s.Partitions(Context(t, opTimeout))
	if err != nil || len(ps) != 2 {
		t.Fatalf("partitions = %+v, %v", ps, err)
	}
	r0 := openReader(t, s, ps[0].ID, earliest)
	fetchN(t, r0, 2, readTimeout, false)
	r1 := openReader(t, s, ps[1].ID, earliest)
	expectNothing(t, r1, 100*time.Millisecond)
	// A reader closed on its own fails afterwards.
	r2 := openReader(t, s, ps[0].ID, earliest)
	if err := r2.Close(); err != nil {
		t.Fatalf("reader close: %v", err)
	}
	pollClosed(t, "fetch on a closed reader", r2.Fetch)
	// Closing the stream ends a fetch in flight and every later call.
	closeEndsPoll(t, "fetch", "partition", r1.Fetch, s.Close)
	pollClosed(t, "fetch after Close", r0.Fetch)
	_, err = s.Partitions(Context(t, opTimeout))
	wantClosed(t, "partitions after Close", err)
	_, err = s.Open(Context(t, opTimeout), ps[0].ID, earliest)
	wantClosed(t, "open after Close", err)
	if err := s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	verifyNoLeaks(t, h, ignore)
}

func streamDiscovery(t *testing.T, h StreamHarness) {
	f, s, ids := newStream(t, h, 2, CanAddPartitions)
	if err := f.(PartitionAdder).AddPartitions(Context(t, opTimeout), 1); err != nil {
		t.Fatalf("add partition: %v", err)
	}
	var added string
	eventually(t, readTimeout, "Partitions did not list the added partition", func() bool {
		ps, err := s.Partitions(Context(t, opTimeout))
		if err != nil {
			t.Fatalf("partitions: %v", err)
		}
		for _, p := range ps {
			if p.ID != ids[0] && p.ID != ids[1] {
				added = p.ID
				return len(ps) == 3
			}
		}
		return false
	})
	produce(t, f, added, numbered("new", 0, 2)...)
	if got := fetchN(t, openReader(t, s, added, earliest), 2, readTimeout, false); !slices.Equal(values(got), wantValues("new", 0, 2)) {
		t.Fatalf("added partition: %v", values(got))
	}
}

func streamPositionGone(t *testing.T, h StreamHarness) {
	f, s, ids := newStream(t, h, 1, CanTrim)
	p := ids[0]
	pos := produce(t, f, p, numbered("m", 0, 10)...)
	// A reader already past the trimmed part is not affected.
	ahead := openReader(t, s, p, brokers.Start{After: pos[6]})
	if err := f.(Trimmer).Trim(Context(t, opTimeout), p, pos[5]); err != nil {
		t.Fatalf("trim: %v", err)
	}
	if got := fetchN(t, ahead, 3, readTimeout, false); !slices.Equal(values(got), wantValues("m", 7, 3)) {
		t.Fatalf("reader ahead of the trim: %v", values(got))
	}
	// After pos[4] the next message is pos[5], still held.
	if got := fetchN(t, openReader(t, s, p, brokers.Start{After: pos[4]}), 5, readTimeout, false); !slices.Equal(values(got), wantValues("m", 5, 5)) {
		t.Fatalf("after the last trimmed position: %v", values(got))
	}
	// After pos[2] the next message, pos[3], is gone: at Open or at the
	// first Fetch.
	r, err := s.Open(Context(t, opTimeout), p, brokers.Start{After: pos[2]})
	if err == nil {
		defer r.Close()
		var res brokers.Result
		res, err = r.Fetch(Context(t, opTimeout), 10, time.Second)
		if err == nil {
			t.Fatalf("reading after a deleted position returned %v", values(res.Messages))
		}
	}
	if !errors.Is(err, brokers.ErrPositionGone) || brokers.Retryable(err) {
		t.Fatalf("after a deleted position: %v (retryable %v), want non-retryable ErrPositionGone", err, brokers.Retryable(err))
	}
	if got := fetchN(t, openReader(t, s, p, earliest), 5, readTimeout, false); values(got)[0] != "m-5" {
		t.Fatalf("earliest after trim starts at %v", values(got))
	}
}

func streamReshardEnd(t *testing.T, h StreamHarness) {
	f, s, p, r := readingStream(t, h, 4, 1, CanReshard)
	kids, err := f.(Resharder).Split(Context(t, opTimeout), p)
	if err != nil {
		t.Fatalf("split: %v", err)
	}
	ctx := Context(t, readTimeout)
	var got []brokers.Message
	for {
		res, err := r.Fetch(ctx, 10, time.Second)
		if err != nil {
			t.Fatalf("fetch of the split parent: %v after %v", err, values(got))
		}
		got = append(got, res.Messages...)
		if res.End {
			break
		}
	}
	if !slices.Equal(values(got), wantValues("m", 1, 3)) {
		t.Fatalf("parent's remaining messages: %v", values(got))
	}
	if res, err := r.Fetch(Context(t, opTimeout), 10, time.Second); err != nil || !res.End || len(res.Messages) > 0 {
		t.Fatalf("fetch after End = %+v, %v", res, err)
	}
	ps, err := s.Partitions(Context(t, opTimeout))
	if err != nil {
		t.Fatal(err)
	}
	parents := map[string][]string{}
	for _, q := range ps {
		parents[q.ID] = q.Parents
	}
	for _, k := range kids {
		if fmt.Sprint(parents[k]) != fmt.Sprint([]string{p}) {
			t.Fatalf("child %s parents %v, want [%s]; partitions %+v", k, parents[k], p, ps)
		}
	}
}

func streamServerRestart(t *testing.T, h StreamHarness) {
	f, s, p, r := readingStream(t, h, 3, 3, CanRestartServer)
	startServer := stopServer(t, f)

	ctx := Context(t, opTimeout)
	if _, err := s.Partitions(ctx); err == nil || !brokers.Retryable(err) {
		t.Fatalf("partitions with the server down: %v, want a retryable error", err)
	}
	checkServerDown(t, "fetch", r.Fetch)

	startServer()
	eventually(t, readTimeout, "producing after the restart kept failing", func() bool {
		_, err := f.Produce(Context(t, opTimeout), p, numbered("m", 3, 3)...)
		return err == nil
	})
	if got := fetchN(t, r, 3, readTimeout, true); !slices.Equal(values(got), wantValues("m", 3, 3)) {
		t.Fatalf("after the restart: %v", values(got))
	}
	expectNothing(t, r, 300*time.Millisecond)
	if _, err := s.Partitions(Context(t, opTimeout)); err != nil {
		t.Fatalf("partitions after the restart: %v", err)
	}
}

func streamConnectionLoss(t *testing.T, h StreamHarness) {
	f, s, p, r := readingStream(t, h, 3, 3, CanCutConnections)
	f.(ConnectionCutter).CutConnections(t)
	produce(t, f, p, numbered("m", 3, 3)...)
	if got := fetchN(t, r, 3, readTimeout, true); !slices.Equal(values(got), wantValues("m", 3, 3)) {
		t.Fatalf("after the connection loss: %v", values(got))
	}
	expectNothing(t, r, 300*time.Millisecond)
	if _, err := s.Partitions(Context(t, opTimeout)); err != nil {
		t.Fatalf("partitions after the connection loss: %v", err)
	}
}
