package nats

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/brokers"
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
	s, err := NewStream(ctxT(t, 10*time.Second), cfg)
	if err != nil {
		t.Fatalf("NewStream: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func (e *streamEnv) subject(s string) string { return e.stream + "." + s }

func openReader(t *testing.T, s *Stream, partition string, start brokers.Start) *Reader {
	t.Helper()
	r, err := s.OpenReader(ctxT(t, 10*time.Second), partition, start)
	if err != nil {
		t.Fatalf("open %s: %v", partition, err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func fetchN(t *testing.T, r *Reader, n int) ([]brokers.Message, brokers.Result) {
	t.Helper()
	ctx := ctxT(t, 20*time.Second)
	var got []brokers.Message
	var last brokers.Result
	for len(got) < n {
		res, err := r.Fetch(ctx, n-len(got), time.Second)
		if err != nil {
			t.Fatalf("fetch after %d of %d: %v", len(got), n, err)
		}
		got = append(got, res.Messages...)
		last = res
	}
	return got, last
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
	ps, err := s.Partitions(ctxT(t, 5*time.Second))
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
	if ps, err = s2.Partitions(ctxT(t, 5*time.Second)); err != nil || len(ps) != 1 || ps[0].ID != e.subject("us") {
		t.Fatalf("configured partitions = %v, %v", ps, err)
	}
	if _, err := s2.Open(ctxT(t, 5*time.Second), e.subject("eu"), brokers.Start{}); !errors.Is(err, brokers.ErrUnknownPartition) {
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
	if err := e.st.DeleteMsg(ctxT(t, 5*time.Second), 3); err != nil {
		t.Fatal(err)
	}
	got, _ = fetchN(t, r, 2)
	if vals(got) != "3,4" || got[0].Position != "4" {
		t.Fatalf("after an interior delete got %s at %s", vals(got), got[0].Position)
	}
	// Retention takes 5..7 before the reader's live consumer delivered them.
	if err := e.st.Purge(ctxT(t, 5*time.Second), jetstream.WithPurgeSequence(8)); err != nil {
		t.Fatal(err)
	}
	_, err := r.Fetch(ctxT(t, 5*time.Second), 10, time.Second)
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
	if err := e.st.Purge(ctxT(t, 5*time.Second), jetstream.WithPurgeSubject(e.subject("b"))); err != nil {
		t.Fatal(err)
	}
	if err := e.st.Purge(ctxT(t, 5*time.Second), jetstream.WithPurgeSubject(e.subject("a"))); err != nil {
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
	if err := e.js.DeleteConsumer(ctxT(t, 5*time.Second), e.stream, name); err != nil {
		t.Fatal(err)
	}
	e.publish(t, e.subject("x"), "3", nil)
	ctx := ctxT(t, 20*time.Second)
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
		for range e.st.ListConsumers(ctxT(t, 5*time.Second)).Info() {
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
	if _, err := s.Open(ctxT(t, 5*time.Second), e.subject("x"), brokers.Start{After: "abc"}); err == nil || brokers.Retryable(err) {
		t.Fatalf("open after a non-sequence: %v", err)
	}
	cfg := e.config()
	cfg.Stream = "MISSING"
	if _, err := NewStream(ctxT(t, 5*time.Second), cfg); err == nil || brokers.Retryable(err) {
		t.Fatalf("NewStream of a missing stream: %v", err)
	}
}
