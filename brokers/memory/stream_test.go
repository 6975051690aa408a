package memory

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/brokers"
)

func newTestStream(t *testing.T, partitions int) (*Stream, *fakeClock) {
	t.Helper()
	return onFakeClock(t, func(c *fakeClock) (*Stream, error) { return NewStream(StreamConfig{Partitions: partitions, Clock: c}) })
}

// mustStream is a new wall-clock stream of cfg.
func mustStream(t *testing.T, cfg StreamConfig) *Stream {
	t.Helper()
	return mustNew(t, NewStream, cfg)
}

// mustNew is open(cfg), failing t on an error.
func mustNew[C any, B any](t *testing.T, open func(C) (B, error), cfg C) B {
	t.Helper()
	b, err := open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// onFakeClock is what open makes on a new fake clock, closed when t ends,
// and the clock.
func onFakeClock[B interface{ Close() error }](t *testing.T, open func(*fakeClock) (B, error)) (B, *fakeClock) {
	t.Helper()
	c := newFakeClock()
	b := mustNew(t, open, c)
	t.Cleanup(func() { _ = b.Close() })
	return b, c
}

// signalWaits makes every wait behind hook (a stream's or a queue's
// testHookWait) send on the returned channel as it begins.
func signalWaits(hook *func()) <-chan struct{} {
	waiting := make(chan struct{}, 1)
	*hook = func() { waiting <- struct{}{} }
	return waiting
}

// fetchWhileWaiting fetches (at most 10, waiting up to a minute) from
// partition "0" of s under ctx, and runs act once the fetch waits. It
// returns, once act has returned too, the fetch's result and error and how
// long it took; an error of act fails t.
func fetchWhileWaiting(t *testing.T, ctx context.Context, s *Stream, act func() error) (res brokers.Result, took time.Duration, err error) {
	t.Helper()
	waiting := signalWaits(&s.testHookWait)
	r, _ := s.Open(context.Background(), "0", brokers.Start{})
	done := make(chan error, 1)
	go func() {
		<-waiting
		done <- act()
	}()
	start := time.Now()
	res, err = r.Fetch(ctx, 10, time.Minute)
	if aerr := <-done; aerr != nil {
		t.Fatal(aerr)
	}
	return res, time.Since(start), err
}

func produceN(t *testing.T, s *Stream, partition string, n int) {
	t.Helper()
	for i := range n {
		if _, err := s.Produce(partition, brokers.Message{Key: []byte(fmt.Sprint("k", i)), Value: []byte(fmt.Sprint("v", i))}); err != nil {
			t.Fatal(err)
		}
	}
}

func positions(msgs []brokers.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Position
	}
	return out
}

func TestStreamConfigValidate(t *testing.T) {
	if _, err := NewStream(StreamConfig{Partitions: -1}); err == nil {
		t.Fatal("negative partitions accepted")
	}
	s := mustStream(t, StreamConfig{})
	ps, err := s.Partitions(context.Background())
	if err != nil || len(ps) != 1 || ps[0].ID != "0" {
		t.Fatalf("zero config partitions = %v, %v; want one partition \"0\"", ps, err)
	}
}

func TestProducePositionsPerPartition(t *testing.T) {
	s, c := newTestStream(t, 2)
	got, err := s.Produce("0", brokers.Message{Value: []byte("a")}, brokers.Message{Value: []byte("b")})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"0", "1"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("positions = %v, want %v", got, want)
	}
	got, _ = s.Produce("1", brokers.Message{Value: []byte("c")})
	if want := []string{"0"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("partition 1 positions = %v, want %v", got, want)
	}
	if _, err := s.Produce("9", brokers.Message{}); !errors.Is(err, brokers.ErrUnknownPartition) {
		t.Fatalf("produce to unknown partition: %v", err)
	}
	r, err := s.Open(context.Background(), "0", brokers.Start{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Fetch(context.Background(), 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Messages[0].Time.Equal(c.Now()) {
		t.Fatalf("time = %v, want the clock's %v", res.Messages[0].Time, c.Now())
	}
}

func TestOpenStart(t *testing.T) {
	tests := []struct {
		name  string
		start brokers.Start
		want  []string
		err   error
	}{
		{"earliest", brokers.Start{Mode: brokers.Earliest}, []string{"0", "1", "2", "3", "4"}, nil},
		{"latest", brokers.Start{Mode: brokers.Latest}, nil, nil},
		{"after first", brokers.Start{After: "0"}, []string{"1", "2", "3", "4"}, nil},
		{"after middle", brokers.Start{After: "2", Mode: brokers.Latest}, []string{"3", "4"}, nil},
		{"after last", brokers.Start{After: "4"}, nil, nil},
		{"after trimmed", brokers.Start{After: "0"}, nil, brokers.ErrPositionGone},
		{"not a position", brokers.Start{After: "abc"}, nil, errNotOffset},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newTestStream(t, 1)
			produceN(t, s, "0", 5)
			if tt.err == brokers.ErrPositionGone {
				if err := s.Trim("0", "2"); err != nil {
					t.Fatal(err)
				}
			}
			r, err := s.Open(context.Background(), "0", tt.start)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("open error = %v, want %v", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			res, err := r.Fetch(context.Background(), 100, 0)
			if err != nil {
				t.Fatal(err)
			}
			if got := positions(res.Messages); strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Fatalf("positions = %v, want %v", got, tt.want)
			}
			if res.Lag != 0 {
				t.Fatalf("lag = %d after reading everything", res.Lag)
			}
		})
	}
}

func TestOpenUnknownPartition(t *testing.T) {
	s, _ := newTestStream(t, 1)
	_, err := s.Open(context.Background(), "7", brokers.Start{})
	if !errors.Is(err, brokers.ErrUnknownPartition) || brokers.Retryable(err) {
		t.Fatalf("err = %v (retryable %v), want non-retryable ErrUnknownPartition", err, brokers.Retryable(err))
	}
}

func TestFetchMaxAndLag(t *testing.T) {
	s, _ := newTestStream(t, 1)
	produceN(t, s, "0", 7)
	r, _ := s.Open(context.Background(), "0", brokers.Start{})
	for _, want := range []struct {
		pos []string
		lag int64
	}{{[]string{"0", "1", "2"}, 4}, {[]string{"3", "4", "5"}, 1}, {[]string{"6"}, 0}, {[]string{}, 0}} {
		res, err := r.Fetch(context.Background(), 3, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := positions(res.Messages); !reflect.DeepEqual(got, want.pos) || res.Lag != want.lag {
			t.Fatalf("fetch = %v lag %d, want %v lag %d", got, res.Lag, want.pos, want.lag)
		}
	}
	if _, err := r.Fetch(context.Background(), 0, 0); err == nil {
		t.Fatal("max 0 accepted")
	}
}

func TestFetchWaitIsRecordedUnderVirtualTime(t *testing.T) {
	s, c := newTestStream(t, 1)
	ctx, p := virtualCtx(c, false)
	r, _ := s.Open(ctx, "0", brokers.Start{})
	res, err := r.Fetch(ctx, 10, 3*time.Second)
	if err != nil || len(res.Messages) != 0 || res.End {
		t.Fatalf("empty fetch = %+v, %v", res, err)
	}
	if got := p.Waits(); !reflect.DeepEqual(got, []time.Duration{3 * time.Second}) {
		t.Fatalf("waits = %v, want one of 3s", got)
	}
	produceN(t, s, "0", 1)
	if _, err := r.Fetch(ctx, 10, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := len(p.Waits()); got != 1 {
		t.Fatalf("a fetch with data waited: %d waits", got)
	}
}

func TestFetchReturnsEarlyOnWallClock(t *testing.T) {
	s := mustStream(t, StreamConfig{Partitions: 2})
	defer s.Close()
	res, el, err := fetchWhileWaiting(t, context.Background(), s, func() error {
		// A message on another partition must not end the wait.
		if _, err := s.Produce("1", brokers.Message{Value: []byte("other")}); err != nil {
			t.Error(err)
		}
		if _, err := s.Produce("0", brokers.Message{Value: []byte("x")}); err != nil {
			t.Error(err)
		}
		return nil
	})
	if err != nil || len(res.Messages) != 1 || string(res.Messages[0].Value) != "x" {
		t.Fatalf("fetch = %+v, %v", res, err)
	}
	if el > 10*time.Second {
		t.Fatalf("fetch took %v, want an early return", el)
	}
}

func TestFetchCancelled(t *testing.T) {
	s := mustStream(t, StreamConfig{})
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	_, el, err := fetchWhileWaiting(t, ctx, s, func() error { cancel(); return nil })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if el > 10*time.Second {
		t.Fatalf("cancelled fetch took %v", el)
	}
}

func TestCloseWakesFetch(t *testing.T) {
	s := mustStream(t, StreamConfig{})
	_, _, err := fetchWhileWaiting(t, context.Background(), s, func() error { _ = s.Close(); return nil })
	if !errors.Is(err, brokers.ErrClosed) || brokers.Retryable(err) {
		t.Fatalf("err = %v, want non-retryable ErrClosed", err)
	}
	if _, err := s.Partitions(context.Background()); !errors.Is(err, brokers.ErrClosed) {
		t.Fatalf("partitions after close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
}

func TestReaderClose(t *testing.T) {
	s, _ := newTestStream(t, 1)
	r, _ := s.Open(context.Background(), "0", brokers.Start{})
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Fetch(context.Background(), 1, 0); !errors.Is(err, brokers.ErrClosed) {
		t.Fatalf("fetch after close: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
}

func TestSplitAndMerge(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestStream(t, 2)
	produceN(t, s, "0", 3)
	r, _ := s.Open(ctx, "0", brokers.Start{})
	if res, _ := r.Fetch(ctx, 1, 0); len(res.Messages) != 1 || res.End {
		t.Fatalf("first fetch = %+v", res)
	}
	kids, err := s.Split("0")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"2", "3"}; !reflect.DeepEqual(kids, want) {
		t.Fatalf("children = %v, want %v", kids, want)
	}
	if _, err := s.Produce("0", brokers.Message{}); err == nil {
		t.Fatal("produce to a closed partition succeeded")
	}
	if _, err := s.Split("0"); err == nil {
		t.Fatal("split of a closed partition succeeded")
	}
	res, err := r.Fetch(ctx, 10, time.Minute) // must not wait: remaining data then End
	if err != nil || !reflect.DeepEqual(positions(res.Messages), []string{"1", "2"}) || !res.End {
		t.Fatalf("parent fetch = %+v, %v; want [1 2] with End", res, err)
	}
	res, err = r.Fetch(ctx, 10, time.Minute)
	if err != nil || len(res.Messages) != 0 || !res.End {
		t.Fatalf("fetch past end = %+v, %v; want End", res, err)
	}
	child, err := s.Merge("1", "3")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Merge("2", "2"); err == nil {
		t.Fatal("merge with itself succeeded")
	}
	ps, err := s.Partitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []brokers.Partition{{ID: "0", Parents: []string{}}, {ID: "1", Parents: []string{}}, {ID: "2", Parents: []string{"0"}}, {ID: "3", Parents: []string{"0"}}, {ID: child, Parents: []string{"1", "3"}}}
	for i := range ps {
		if len(ps[i].Parents) == 0 {
			ps[i].Parents = []string{}
		}
	}
	if !reflect.DeepEqual(ps, want) {
		t.Fatalf("partitions = %+v, want %+v", ps, want)
	}
	// Latest on a closed, drained partition ends at once.
	r1, _ := s.Open(ctx, "1", brokers.Start{Mode: brokers.Latest})
	if res, err := r1.Fetch(ctx, 10, time.Minute); err != nil || !res.End {
		t.Fatalf("latest on closed = %+v, %v", res, err)
	}
}

func TestAddPartitions(t *testing.T) {
	s, _ := newTestStream(t, 1)
	ids, err := s.AddPartitions(2)
	if err != nil || !reflect.DeepEqual(ids, []string{"1", "2"}) {
		t.Fatalf("AddPartitions = %v, %v", ids, err)
	}
	ps, _ := s.Partitions(context.Background())
	if len(ps) != 3 {
		t.Fatalf("partitions = %v", ps)
	}
	if _, err := s.AddPartitions(0); err == nil {
		t.Fatal("AddPartitions(0) accepted")
	}
}

func TestTrim(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestStream(t, 1)
	produceN(t, s, "0", 5)
	r, _ := s.Open(ctx, "0", brokers.Start{})
	if err := s.Trim("0", "3"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Fetch(ctx, 10, 0); !errors.Is(err, brokers.ErrPositionGone) || brokers.Retryable(err) {
		t.Fatalf("fetch of trimmed = %v, want non-retryable ErrPositionGone", err)
	}
	// After the last trimmed position is still readable.
	r2, err := s.Open(ctx, "0", brokers.Start{After: "2"})
	if err != nil {
		t.Fatal(err)
	}
	if res, _ := r2.Fetch(ctx, 10, 0); !reflect.DeepEqual(positions(res.Messages), []string{"3", "4"}) {
		t.Fatalf("after trim = %v", positions(res.Messages))
	}
	r3, _ := s.Open(ctx, "0", brokers.Start{Mode: brokers.Earliest})
	if res, _ := r3.Fetch(ctx, 10, 0); !reflect.DeepEqual(positions(res.Messages), []string{"3", "4"}) {
		t.Fatalf("earliest after trim = %v", positions(res.Messages))
	}
	// Trimming past the end keeps positions going.
	if err := s.Trim("0", "100"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Produce("0", brokers.Message{}); !reflect.DeepEqual(got, []string{"5"}) {
		t.Fatalf("position after full trim = %v", got)
	}
	if err := s.Trim("0", "x"); err == nil {
		t.Fatal("trim to a non-position accepted")
	}
}

func TestStreamFaults(t *testing.T) {
	custom := errors.New("custom")
	tests := []struct {
		name   string
		inject func(s *Stream)
		// calls is the sequence of operations; want the error each gives.
		calls []string
		want  []error
	}{
		{"fetch twice", func(s *Stream) { s.FailNext(OpFetch, 2, nil) },
			[]string{"fetch", "fetch", "fetch"}, []error{brokers.ErrInjected, brokers.ErrInjected, nil}},
		{"custom error", func(s *Stream) { s.FailNext(OpOpen, 1, custom) },
			[]string{"open", "open"}, []error{custom, nil}},
		{"partitions", func(s *Stream) { s.FailNext(OpPartitions, 1, nil) },
			[]string{"fetch", "partitions", "partitions"}, []error{nil, brokers.ErrInjected, nil}},
		{"any in order", func(s *Stream) { s.FailNext(OpAny, 2, nil); s.FailNext(OpFetch, 1, custom) },
			[]string{"partitions", "fetch", "fetch", "fetch"}, []error{brokers.ErrInjected, brokers.ErrInjected, custom, nil}},
		{"cleared", func(s *Stream) { s.FailNext(OpFetch, 1, nil); s.ClearFaults() },
			[]string{"fetch"}, []error{nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			s, _ := newTestStream(t, 1)
			r, err := s.Open(ctx, "0", brokers.Start{})
			if err != nil {
				t.Fatal(err)
			}
			tt.inject(s)
			for i, op := range tt.calls {
				switch op {
				case "fetch":
					_, err = r.Fetch(ctx, 1, 0)
				case "open":
					_, err = s.Open(ctx, "0", brokers.Start{})
				case "partitions":
					_, err = s.Partitions(ctx)
				}
				if !errors.Is(err, tt.want[i]) || (tt.want[i] == nil && err != nil) {
					t.Fatalf("call %d (%s): err = %v, want %v", i, op, err, tt.want[i])
				}
				if errors.Is(err, brokers.ErrInjected) && !brokers.Retryable(err) {
					t.Fatalf("injected error is not retryable: %v", err)
				}
			}
		})
	}
}

func TestStreamDelay(t *testing.T) {
	s, c := newTestStream(t, 1)
	ctx, p := virtualCtx(c, true)
	s.Delay(OpFetch, 2*time.Second)
	s.Delay(OpAny, time.Second)
	produceN(t, s, "0", 1)
	r, _ := s.Open(ctx, "0", brokers.Start{})
	if _, err := r.Fetch(ctx, 1, 0); err != nil {
		t.Fatal(err)
	}
	if got, want := p.Waits(), []time.Duration{time.Second, 3 * time.Second}; !reflect.DeepEqual(got, want) {
		t.Fatalf("waits = %v, want %v (open: any; fetch: fetch+any)", got, want)
	}
	s.Delay(OpFetch, 0)
	s.Delay(OpAny, 0)
	if _, err := r.Fetch(ctx, 1, 0); err != nil {
		t.Fatal(err)
	}
	if got := len(p.Waits()); got != 2 {
		t.Fatalf("delay not removed: %d waits", got)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("unknown op did not panic")
		}
	}()
	s.FailNext("fecth", 1, nil)
}

func TestFetchedMessagesAreCopies(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestStream(t, 1)
	in := brokers.Message{Key: []byte("k"), Value: []byte("v"), Headers: []brokers.Header{{Key: "h", Value: []byte("hv")}}}
	if _, err := s.Produce("0", in); err != nil {
		t.Fatal(err)
	}
	in.Value[0] = 'X'
	r, _ := s.Open(ctx, "0", brokers.Start{})
	res, _ := r.Fetch(ctx, 1, 0)
	if string(res.Messages[0].Value) != "v" {
		t.Fatal("Produce kept the caller's slice")
	}
	res.Messages[0].Headers[0].Value[0] = 'X'
	r2, _ := s.Open(ctx, "0", brokers.Start{})
	res2, _ := r2.Fetch(ctx, 1, 0)
	if string(res2.Messages[0].Headers[0].Value) != "hv" {
		t.Fatal("Fetch shared the stored slice")
	}
}

// streamScript runs a fixed scenario and returns a transcript of every
// result, so that two runs can be compared.
func streamScript(t *testing.T) string {
	c := newFakeClock()
	s := mustStream(t, StreamConfig{Partitions: 2, Clock: c})
	defer s.Close()
	ctx, p := virtualCtx(c, true)
	var b strings.Builder
	log := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	s.FailNext(OpFetch, 1, nil)
	s.Delay(OpOpen, time.Second)
	for i := range 5 {
		pos, err := s.Produce(fmt.Sprint(i%2), brokers.Message{Key: []byte{byte(i)}, Value: []byte(fmt.Sprint(i))})
		log("produce %d -> %v %v", i, pos, err)
		c.Advance(time.Millisecond)
	}
	r, err := s.Open(ctx, "0", brokers.Start{})
	log("open %v", err)
	for range 3 {
		res, err := r.Fetch(ctx, 2, time.Second)
		for i := range res.Messages {
			res.Messages[i].Handle = nil
		}
		log("fetch %+v %v now=%v", res, err, c.Now())
	}
	kids, err := s.Split("0")
	log("split %v %v", kids, err)
	res, err := r.Fetch(ctx, 2, time.Second)
	log("fetch %+v %v", res, err)
	ps, err := s.Partitions(ctx)
	log("partitions %+v %v waits=%v", ps, err, p.Waits())
	tx, err := s.BeginTx("1")
	log("begin %v", err)
	pos, err := tx.Produce(brokers.Message{Value: []byte("t")})
	log("tx produce %v %v", pos, err)
	pos, err = s.Produce("1", brokers.Message{Value: []byte("behind")})
	log("produce %v %v", pos, err)
	st, err := s.Resolve(ctx, "1", brokers.Latest)
	log("resolve %+v %v", st, err)
	log("abort %v", tx.Abort())
	r1, err := s.Open(ctx, "1", st)
	log("open %v", err)
	res, err = r1.Fetch(ctx, 10, time.Second)
	log("fetch %+v %v", res, err)
	log("forget %v", s.Forget("0"))
	log("recreate %v", s.Recreate())
	res, err = r1.Fetch(ctx, 10, time.Second)
	log("fetch %+v %v", res, err)
	ps, err = s.Partitions(ctx)
	log("partitions %+v %v waits=%v", ps, err, p.Waits())
	return b.String()
}

func TestStreamDeterminism(t *testing.T) {
	a, b := streamScript(t), streamScript(t)
	if a != b {
		t.Fatalf("two runs differ:\n%s\n---\n%s", a, b)
	}
	for _, want := range []string{"injected", "End:true", "Value:[98 101 104 105 110 100]", "recreated"} {
		if !strings.Contains(a, want) {
			t.Fatalf("script did not exercise faults, resharding, transactions and recreation (no %q):\n%s", want, a)
		}
	}
	if strings.Contains(a, "Value:[116]") {
		t.Fatalf("an aborted record was read:\n%s", a)
	}
}

func TestStreamClientCloseLeavesBroker(t *testing.T) {
	ctx := context.Background()
	s, _ := newTestStream(t, 1)
	c1, c2 := s.NewClient(), s.NewClient()
	r1, err := c1.Open(ctx, "0", brokers.Start{})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := c2.Open(ctx, "0", brokers.Start{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c1.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r1.Fetch(ctx, 1, 0); !errors.Is(err, brokers.ErrClosed) {
		t.Fatalf("reader of a closed client: %v", err)
	}
	if _, err := c1.Open(ctx, "0", brokers.Start{}); !errors.Is(err, brokers.ErrClosed) {
		t.Fatalf("open on a closed client: %v", err)
	}
	if _, err := c1.Partitions(ctx); !errors.Is(err, brokers.ErrClosed) {
		t.Fatalf("partitions on a closed client: %v", err)
	}
	produceN(t, s, "0", 1)
	if res, err := r2.Fetch(ctx, 1, 0); err != nil || len(res.Messages) != 1 {
		t.Fatalf("other client's reader = %+v, %v", res, err)
	}
}
