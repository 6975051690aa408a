package nats

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/brokertest"
)

type streamEnv struct {
	*queueEnv
	st jetstream.Stream
}

// newStreamEnv makes a stream with the given subjects.
func newStreamEnv(t *testing.T, subjects ...string) *streamEnv {
	t.Helper()
	ts := startServer(t)
	_, js := ts.client(t)
	name := uniqueName("S")
	for i, s := range subjects {
		subjects[i] = name + "." + s
	}
	st := ts.createStream(t, js, jetstream.StreamConfig{Name: name, Subjects: subjects})
	return &streamEnv{queueEnv: &queueEnv{ts: ts, js: js, stream: name}, st: st}
}

func (e *streamEnv) config() StreamConfig {
	return StreamConfig{Conn: e.ts.connConfig(), Stream: e.stream}
}

func (e *streamEnv) openStream(t *testing.T, cfg StreamConfig) *Stream {
	t.Helper()
	return brokertest.Open(t, 10*time.Second, "NewStream", func(ctx context.Context) (*Stream, error) {
		return NewStream(ctx, cfg)
	})
}

func (e *streamEnv) subject(s string) string { return e.stream + "." + s }

func openReader(t *testing.T, s *Stream, partition string, start brokers.Start) *Reader {
	t.Helper()
	return brokertest.Open(t, 10*time.Second, "open "+partition, func(ctx context.Context) (*Reader, error) {
		return s.OpenReader(ctx, partition, start)
	})
}

func fetchN(t *testing.T, r *Reader, n int) ([]brokers.Message, brokers.Result) {
	t.Helper()
	return brokertest.PollN(t, brokertest.Context(t, 20*time.Second), "fetch", r.Fetch, n)
}

func vals(msgs []brokers.Message) string {
	var s []string
	for _, m := range msgs {
		s = append(s, string(m.Value))
	}
	return strings.Join(s, ",")
}

// TestStreamFields is brokertest's fields-carried without the order of
// headers of different names, which nats.go does not keep.
func TestStreamFields(t *testing.T) {
	e := newStreamEnv(t, "x")
	seq := e.publish(t, e.subject("x"), `{"id":1}`, map[string]string{"key": "key-1", "h2": "y", "h1": "x"})
	s := e.openStream(t, e.config())
	got, _ := fetchN(t, openReader(t, s, e.subject("x"), brokers.Start{}), 1)
	m := got[0]
	if m.Position != strconv.FormatUint(seq, 10) || m.ID != "" || m.Handle != nil || m.Deliveries != 0 {
		t.Fatalf("stream message = %+v", m)
	}
	if string(m.Key) != "key-1" || string(m.Value) != `{"id":1}` || m.Tombstone || m.Time.IsZero() {
		t.Fatalf("stream message = %+v", m)
	}
	if len(m.Headers) != 3 || m.Headers[0].Key != "h1" || m.Headers[1].Key != "h2" || m.Headers[2].Key != "key" {
		t.Fatalf("headers = %+v", m.Headers)
	}
}

func TestStreamPartitionsAndLag(t *testing.T) {
	e := newStreamEnv(t, "eu", "us")
	for i := range 5 {
		e.publish(t, e.subject("eu"), fmt.Sprint("eu-", i), nil)
		e.publish(t, e.subject("us"), fmt.Sprint("us-", i), nil)
	}
	s := e.openStream(t, e.config())
	ps, err := s.Partitions(brokertest.Context(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(ps) != fmt.Sprintf("[{%s []} {%s []}]", e.subject("eu"), e.subject("us")) {
		t.Fatalf("partitions = %v", ps)
	}
	r := openReader(t, s, e.subject("eu"), brokers.Start{})
	got, res := fetchN(t, r, 2)
	if vals(got) != "eu-0,eu-1" || res.Lag != 3 {
		t.Fatalf("first fetch = %s lag %d, want eu-0,eu-1 lag 3", vals(got), res.Lag)
	}
	// Positions are stream sequences: 1, 3, 5, ... for eu.
	if got[0].Position != "1" || got[1].Position != "3" {
		t.Fatalf("positions = %s, %s", got[0].Position, got[1].Position)
	}
	got, res = fetchN(t, r, 3)
	if vals(got) != "eu-2,eu-3,eu-4" || res.Lag != 0 {
		t.Fatalf("second fetch = %s lag %d", vals(got), res.Lag)
	}

	// Configured subjects replace the stream's own; a filter narrower
	// than a stream subject is a partition of its own.
	cfg := e.config()
	cfg.Subjects = []string{e.subject("us")}
	s2 := e.openStream(t, cfg)
	if ps, err = s2.Partitions(brokertest.Context(t, 5*time.Second)); err != nil || len(ps) != 1 || ps[0].ID != e.subject("us") {
		t.Fatalf("configured partitions = %v, %v", ps, err)
	}
	if _, err := s2.Open(brokertest.Context(t, 5*time.Second), e.subject("eu"), brokers.Start{}); !errors.Is(err, brokers.ErrUnknownPartition) {
		t.Fatalf("open of a subject not configured: %v", err)
	}
}

// TestStreamGoneInFetch: messages deleted from the front of a one-subject
// stream before a reader got to them fail its next fetch with
// ErrPositionGone; a single deleted message inside the stream does not.
func TestStreamGoneInFetch(t *testing.T) {
	e := newStreamEnv(t, "x")
	for i := range 10 {
		e.publish(t, e.subject("x"), fmt.Sprint(i), nil) // sequences 1..10
	}
	s := e.openStream(t, e.config())
	r := openReader(t, s, e.subject("x"), brokers.Start{})
	got, _ := fetchN(t, r, 2) // read 1, 2; next is 3
	if vals(got) != "0,1" {
		t.Fatalf("got %s", vals(got))
	}
	// An interior delete (sequence 3) is not a loss the reader reports.
	if err := e.st.DeleteMsg(brokertest.Context(t, 5*time.Second), 3); err != nil {
		t.Fatal(err)
	}
	got, _ = fetchN(t, r, 2)
	if vals(got) != "3,4" || got[0].Position != "4" {
		t.Fatalf("after an interior delete got %s at %s", vals(got), got[0].Position)
	}
	// Retention takes 5..7 before the reader's live consumer delivered them.
	if err := e.st.Purge(brokertest.Context(t, 5*time.Second), jetstream.WithPurgeSequence(8)); err != nil {
		t.Fatal(err)
	}
	_, err := r.Fetch(brokertest.Context(t, 5*time.Second), 10, time.Second)
	if !errors.Is(err, brokers.ErrPositionGone) || brokers.Retryable(err) {
		t.Fatalf("fetch after its next messages were purged: %v", err)
	}
}

// TestStreamSubjectPartitionNoFalseGone: on a stream with two subjects,
// purging one subject's old messages does not make a reader of the other
// report ErrPositionGone, even when the stream's first sequence moves past
// the reader's position.
func TestStreamSubjectPartitionNoFalseGone(t *testing.T) {
	e := newStreamEnv(t, "a", "b")
	e.publish(t, e.subject("a"), "a-0", nil) // 1
	for i := range 5 {
		e.publish(t, e.subject("b"), fmt.Sprint("b-", i), nil) // 2..6
	}
	s := e.openStream(t, e.config())
	r := openReader(t, s, e.subject("a"), brokers.Start{After: "1"})
	if err := e.st.Purge(brokertest.Context(t, 5*time.Second), jetstream.WithPurgeSubject(e.subject("b"))); err != nil {
		t.Fatal(err)
	}
	if err := e.st.Purge(brokertest.Context(t, 5*time.Second), jetstream.WithPurgeSubject(e.subject("a"))); err != nil {
		t.Fatal(err)
	}
	e.publish(t, e.subject("a"), "a-1", nil)
	got, _ := fetchN(t, r, 1)
	if vals(got) != "a-1" {
		t.Fatalf("got %s", vals(got))
	}
	// Opening after a-0 again: the stream's first sequence is past 2 but the
	// partition is one subject of two, so that is not taken as a loss.
	r2 := openReader(t, s, e.subject("a"), brokers.Start{After: "1"})
	if got, _ := fetchN(t, r2, 1); vals(got) != "a-1" {
		t.Fatalf("reopened: %s", vals(got))
	}
}

// TestStreamReaderSurvivesLostConsumer: when the server drops the reader's
// consumer (inactive threshold, restart), the reader makes a new one at its
// own position: no loss, no duplicate.
func TestStreamReaderSurvivesLostConsumer(t *testing.T) {
	e := newStreamEnv(t, "x")
	for i := range 3 {
		e.publish(t, e.subject("x"), fmt.Sprint(i), nil)
	}
	s := e.openStream(t, e.config())
	r := openReader(t, s, e.subject("x"), brokers.Start{})
	if got, _ := fetchN(t, r, 2); vals(got) != "0,1" {
		t.Fatalf("got %s", vals(got))
	}
	r.mu.Lock()
	name := r.cons.CachedInfo().Name
	r.mu.Unlock()
	if err := e.js.DeleteConsumer(brokertest.Context(t, 5*time.Second), e.stream, name); err != nil {
		t.Fatal(err)
	}
	e.publish(t, e.subject("x"), "3", nil)
	ctx := brokertest.Context(t, 20*time.Second)
	var got []brokers.Message
	for len(got) < 2 {
		res, err := r.Fetch(ctx, 10, time.Second)
		if err != nil {
			if !brokers.Retryable(err) {
				t.Fatalf("fetch after the consumer was deleted: %v", err)
			}
			continue
		}
		got = append(got, res.Messages...)
	}
	if vals(got) != "2,3" {
		t.Fatalf("after the consumer was lost: %s, want 2,3", vals(got))
	}
}

// TestStreamCloseDeletesConsumers: closing a reader or the stream removes
// the readers' consumers from the server.
func TestStreamCloseDeletesConsumers(t *testing.T) {
	e := newStreamEnv(t, "x")
	s := e.openStream(t, e.config())
	r1 := openReader(t, s, e.subject("x"), brokers.Start{})
	openReader(t, s, e.subject("x"), brokers.Start{Mode: brokers.Latest})
	count := func() int {
		n := 0
		for range e.st.ListConsumers(brokertest.Context(t, 5*time.Second)).Info() {
			n++
		}
		return n
	}
	if n := count(); n != 2 {
		t.Fatalf("%d consumers with two readers", n)
	}
	r1.Close()
	if n := count(); n != 1 {
		t.Fatalf("%d consumers after closing one reader", n)
	}
	s.Close()
	if n := count(); n != 0 {
		t.Fatalf("%d consumers after closing the stream", n)
	}
}

func TestStreamOpenErrors(t *testing.T) {
	e := newStreamEnv(t, "x")
	s := e.openStream(t, e.config())
	if _, err := s.Open(brokertest.Context(t, 5*time.Second), e.subject("x"), brokers.Start{After: "abc"}); err == nil || brokers.Retryable(err) {
		t.Fatalf("open after a non-sequence: %v", err)
	}
	cfg := e.config()
	cfg.Stream = "MISSING"
	if _, err := NewStream(brokertest.Context(t, 5*time.Second), cfg); err == nil || brokers.Retryable(err) {
		t.Fatalf("NewStream of a missing stream: %v", err)
	}
}

// TestStreamResolve: Latest names the stream's last sequence, Earliest the
// sequence before its first when its front was removed; both are the very
// beginning of a stream that never lost or held anything. A reader opened
// at the result reads exactly what it should.
func TestStreamResolve(t *testing.T) {
	e := newStreamEnv(t, "a", "b")
	s := e.openStream(t, e.config())
	ctx := brokertest.Context(t, 10*time.Second)
	resolve := func(p string, mode brokers.StartMode) brokers.Start {
		t.Helper()
		st, err := s.Resolve(ctx, p, mode)
		if err != nil {
			t.Fatalf("resolve %s %v: %v", p, mode, err)
		}
		return st
	}
	a, b := e.subject("a"), e.subject("b")
	earliest := brokers.Start{Mode: brokers.Earliest}
	if st := resolve(a, brokers.Latest); st != earliest {
		t.Fatalf("Latest of an empty stream = %+v, want %+v", st, earliest)
	}
	if st := resolve(a, brokers.Earliest); st != earliest {
		t.Fatalf("Earliest of an empty stream = %+v", st)
	}
	e.publish(t, a, "a-0", nil) // 1
	e.publish(t, b, "b-0", nil) // 2
	e.publish(t, a, "a-1", nil) // 3
	latest := resolve(a, brokers.Latest)
	if latest != (brokers.Start{After: "3"}) {
		t.Fatalf("Latest after 3 messages = %+v, want After 3", latest)
	}
	if st := resolve(b, brokers.Latest); st != latest {
		t.Fatalf("Latest of the other subject = %+v, want the stream's last sequence too", st)
	}
	if st := resolve(a, brokers.Earliest); st != earliest {
		t.Fatalf("Earliest with nothing removed = %+v", st)
	}
	r := openReader(t, s, a, latest)
	e.publish(t, a, "a-2", nil) // 4
	if got, _ := fetchN(t, r, 1); vals(got) != "a-2" {
		t.Fatalf("a reader at the resolved Latest got %s first", vals(got))
	}

	if err := e.st.Purge(ctx, jetstream.WithPurgeSequence(3)); err != nil { // removes 1, 2
		t.Fatal(err)
	}
	first := resolve(a, brokers.Earliest)
	if first != (brokers.Start{After: "2"}) {
		t.Fatalf("Earliest after a purge of 1..2 = %+v, want After 2", first)
	}
	if got, _ := fetchN(t, openReader(t, s, a, first), 2); vals(got) != "a-1,a-2" {
		t.Fatalf("a reader at the resolved Earliest got %s", vals(got))
	}
	// Everything removed: Earliest is after the last sequence.
	if err := e.st.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	if st := resolve(a, brokers.Earliest); st != (brokers.Start{After: "4"}) {
		t.Fatalf("Earliest of a purged stream = %+v, want After 4", st)
	}

	if _, err := s.Resolve(ctx, e.subject("c"), brokers.Latest); !errors.Is(err, brokers.ErrUnknownPartition) {
		t.Fatalf("resolve of a subject not in the stream: %v", err)
	}
	if _, err := s.Resolve(ctx, a, brokers.StartMode(9)); err == nil || brokers.Retryable(err) {
		t.Fatalf("resolve of an unknown mode: %v", err)
	}
}

// TestStreamStartAt: Start{At: t} reads from the first message stored at
// or after t, also when the reader's consumer is made again before its
// first fetch.
func TestStreamStartAt(t *testing.T) {
	e := newStreamEnv(t, "x")
	ctx := brokertest.Context(t, 10*time.Second)
	e.publish(t, e.subject("x"), "old", nil)
	seq := e.publish(t, e.subject("x"), "at", nil)
	e.publish(t, e.subject("x"), "later", nil)
	m, err := e.st.GetMsg(ctx, seq)
	if err != nil {
		t.Fatal(err)
	}
	s := e.openStream(t, e.config())
	r := openReader(t, s, e.subject("x"), brokers.Start{At: m.Time})
	if got, _ := fetchN(t, r, 2); vals(got) != "at,later" {
		t.Fatalf("from the time of %q got %s", "at", vals(got))
	}

	r = openReader(t, s, e.subject("x"), brokers.Start{At: m.Time.Add(time.Nanosecond)})
	r.mu.Lock()
	name := r.cons.CachedInfo().Name
	r.mu.Unlock()
	if err := e.js.DeleteConsumer(ctx, e.stream, name); err != nil {
		t.Fatal(err)
	}
	var got []brokers.Message
	for len(got) < 1 {
		res, err := r.Fetch(ctx, 10, time.Second)
		if err != nil && !brokers.Retryable(err) {
			t.Fatalf("fetch after the consumer was lost: %v", err)
		}
		got = append(got, res.Messages...)
	}
	if vals(got) != "later" {
		t.Fatalf("from just after %q, with the consumer made again: %s", "at", vals(got))
	}
}

// recreate deletes the stream and creates it again with its subjects, and
// publishes n messages to subject x (sequences 1..n again).
func (e *streamEnv) recreate(t *testing.T, n int) {
	t.Helper()
	ctx := brokertest.Context(t, 10*time.Second)
	info, err := e.st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.js.DeleteStream(ctx, e.stream); err != nil {
		t.Fatal(err)
	}
	e.st = e.ts.createStream(t, e.js, jetstream.StreamConfig{Name: e.stream, Subjects: info.Config.Subjects})
	for i := range n {
		e.publish(t, e.subject("x"), fmt.Sprint("new-", i), nil)
	}
}

// TestStreamPositionUnknownBeyondEnd: a checkpoint beyond the stream's last
// sequence (the stream was deleted and created again with fewer messages)
// fails Open with ErrPositionUnknown, not retryable, naming stream,
// subject and both positions; a checkpoint below the first sequence is
// still ErrPositionGone.
func TestStreamPositionUnknownBeyondEnd(t *testing.T) {
	e := newStreamEnv(t, "x")
	for i := range 5 {
		e.publish(t, e.subject("x"), fmt.Sprint("old-", i), nil)
	}
	s := e.openStream(t, e.config())
	ctx := brokertest.Context(t, 10*time.Second)
	openReader(t, s, e.subject("x"), brokers.Start{After: "5"}) // the end is fine
	e.recreate(t, 2)
	_, err := s.Open(ctx, e.subject("x"), brokers.Start{After: "5"})
	if !errors.Is(err, brokers.ErrPositionUnknown) || brokers.Retryable(err) {
		t.Fatalf("open after 5 on a stream whose last sequence is 2: %v (retryable %v), want non-retryable ErrPositionUnknown", err, brokers.Retryable(err))
	}
	for _, want := range []string{e.stream, e.subject("x"), "5", "2"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not name %q", err, want)
		}
	}
	var be *brokers.Error
	if !errors.As(err, &be) {
		t.Fatalf("error %T is not a *brokers.Error", err)
	}

	if err := e.st.Purge(ctx); err != nil { // first sequence 3 now
		t.Fatal(err)
	}
	if _, err := s.Open(ctx, e.subject("x"), brokers.Start{After: "1"}); !errors.Is(err, brokers.ErrPositionGone) || brokers.Retryable(err) {
		t.Fatalf("open after a purged position: %v, want ErrPositionGone", err)
	}
}

// TestStreamPositionUnknownAfterRecreationWhileReading: a stream deleted
// and created again under a running reader, and filled past the reader's
// position before the reader looks, fails the reader with
// ErrPositionUnknown instead of reading on from its old sequence (which
// would drop the new stream's first messages).
func TestStreamPositionUnknownAfterRecreationWhileReading(t *testing.T) {
	e := newStreamEnv(t, "x")
	for i := range 3 {
		e.publish(t, e.subject("x"), fmt.Sprint("old-", i), nil)
	}
	s := e.openStream(t, e.config())
	r := openReader(t, s, e.subject("x"), brokers.Start{})
	if got, _ := fetchN(t, r, 3); vals(got) != "old-0,old-1,old-2" {
		t.Fatalf("got %s", vals(got))
	}
	e.recreate(t, 5)
	ctx := brokertest.Context(t, 20*time.Second)
	for {
		res, err := r.Fetch(ctx, 10, 200*time.Millisecond)
		if len(res.Messages) > 0 {
			t.Fatalf("after the stream was created again the reader read on: %s", vals(res.Messages))
		}
		if err == nil || brokers.Retryable(err) {
			if ctx.Err() != nil {
				t.Fatalf("no ErrPositionUnknown before the deadline: %v", err)
			}
			continue
		}
		if !errors.Is(err, brokers.ErrPositionUnknown) || !strings.Contains(err.Error(), "created again") {
			t.Fatalf("fetch after the stream was created again: %v, want ErrPositionUnknown", err)
		}
		return
	}
}
