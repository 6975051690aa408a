package actors

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/actors/placement"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/memory"
	"github.com/drover-dev/drover/internal/clock"
	"github.com/drover-dev/drover/internal/exec"
	"github.com/drover-dev/drover/persistence"
	memstore "github.com/drover-dev/drover/persistence/memory"
)

func TestBackoffIsFullJitterUnderACappedExponential(t *testing.T) {
	r := NewRand(1)
	for n := 1; n <= 12; n++ {
		limit := time.Second << (n - 1)
		if limit > time.Minute || n > 7 {
			limit = time.Minute
		}
		var max time.Duration
		for i := 0; i < 2000; i++ {
			d := backoff(r, n, time.Second, time.Minute)
			if d < 0 || d > limit {
				t.Fatalf("n=%d: %s outside [0, %s]", n, d, limit)
			}
			if d > max {
				max = d
			}
		}
		if max < limit*8/10 {
			t.Errorf("n=%d: largest of 2000 draws %s, expected near %s (jitter too narrow)", n, max, limit)
		}
	}
}

func TestSpecDefaultsAndErrors(t *testing.T) {
	st, _ := memory.NewStream(memory.StreamConfig{Partitions: 1})
	q, _ := memory.NewQueue(memory.QueueConfig{})
	s, err := SourceSpec{Name: "a", Stream: st}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if s.Table != "a" || s.BatchSize != 500 || s.MaxWait != time.Second || s.MaxConsecutiveFailures != 5 ||
		s.LeaseTTL != 10*time.Second || s.Discovery != 30*time.Second || s.Slots != 1 || s.MaxMessageBytes != 1<<20 {
		t.Fatalf("defaults: %+v", s)
	}
	for _, c := range []struct {
		spec SourceSpec
		want string
	}{
		{SourceSpec{Stream: st}, "source: name required"},
		{SourceSpec{Name: "a"}, "source a: exactly one of stream and queue must be set"},
		{SourceSpec{Name: "a", Stream: st, Queue: q}, "source a: exactly one of stream and queue must be set"},
		{SourceSpec{Name: "a", Stream: st, Table: "drop table"}, `source a: table name "drop table"`},
		{SourceSpec{Name: "a", Stream: st, Schema: "id:whatever"}, "source a: schema:"},
		{SourceSpec{Name: "a", Stream: st, KeyField: "a..b"}, "source a: decode: key field"},
	} {
		_, err := c.spec.withDefaults()
		if err == nil || len(err.Error()) < len(c.want) || err.Error()[:len(c.want)] != c.want {
			t.Errorf("%+v: error %v, want prefix %q", c.spec, err, c.want)
		}
	}
}

func TestUnitOrderIsNatural(t *testing.T) {
	units := []string{"s/10", "s/2", "s/1", "q/slot-10", "q/slot-9", "s/shardId-2"}
	sort.Slice(units, func(i, j int) bool { return unitLess(units[i], units[j]) })
	want := []string{"q/slot-9", "q/slot-10", "s/1", "s/2", "s/10", "s/shardId-2"}
	if fmt.Sprint(units) != fmt.Sprint(want) {
		t.Fatalf("%v, want %v", units, want)
	}
}

// static is a membership view that never changes.
type static struct{ members []placement.Member }

func (s static) Local() placement.Member                               { return s.members[0] }
func (s static) Members() []placement.Member                           { return append([]placement.Member(nil), s.members...) }
func (static) Watch(func()) func()                                     { return func() {} }
func (static) SetState(context.Context, placement.MemberState) error   { return nil }
func (static) SetSources(context.Context, []placement.SourceTag) error { return nil }
func (static) Leave(context.Context) error                             { return nil }

// The production wiring: protoactor's goroutine dispatcher, one goroutine
// per job, the wall clock — under the race detector.
func TestRealGoroutinesApplyEverythingAndDrain(t *testing.T) {
	st, _ := memory.NewStream(memory.StreamConfig{Partitions: 4})
	q, _ := memory.NewQueue(memory.QueueConfig{AckDeadline: 5 * time.Second})
	store := memstore.New(memstore.Config{})
	ex := &exec.Goroutines{}
	env := Env{
		Node: "n1", Clock: clock.Real{}, Rand: NewRand(1), Executor: ex, Store: store,
		Membership: static{[]placement.Member{{Name: "n1", State: placement.StateAlive}}},
	}
	n, err := Start(env, []SourceSpec{
		{Name: "s", Stream: st, KeyField: "id", BatchSize: 50, MaxWait: 20 * time.Millisecond},
		{Name: "q", Queue: q, KeyField: "id", Slots: 3, BatchSize: 20, MaxWait: 20 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for p := 0; p < 4; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			for i := 0; i < 250; i++ {
				_, _ = st.Produce(fmt.Sprint(p), brokers.Message{Value: []byte(fmt.Sprintf(`{"id":"%d-%d"}`, p, i))})
			}
		}(p)
	}
	for i := 0; i < 300; i++ {
		q.Send(brokers.Message{Value: []byte(fmt.Sprintf(`{"id":"q%d"}`, i))})
	}
	wg.Wait()
	applied := func() (s, q int64) {
		for _, src := range n.Tree().Sources {
			for _, u := range src.Units {
				if src.Name == "s" {
					s += u.Applied
				} else {
					q += u.Applied
				}
			}
		}
		return
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		s, qa := applied()
		if s == 1000 && qa == 300 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("applied stream %d/1000 queue %d/300 after 20 s; tree %+v", s, qa, n.Tree())
		}
		time.Sleep(5 * time.Millisecond) // polling a condition with a deadline
	}
	select {
	case <-n.Drain():
	case <-time.After(10 * time.Second):
		t.Fatal("drain did not finish in 10 s")
	}
	n.Close()
	ex.Wait()
	leases, _ := store.List(context.Background())
	if len(leases) != 7 {
		t.Fatalf("%d leases, want 7", len(leases))
	}
	for _, l := range leases {
		if l.Owner != "" {
			t.Errorf("lease %s still held by %s after drain", l.Unit, l.Owner)
		}
	}
	if q.Pending() != 0 || q.InFlight() != 0 || q.Acked() != 300 {
		t.Errorf("queue pending %d in flight %d acked %d", q.Pending(), q.InFlight(), q.Acked())
	}
	recs, _ := store.Records(context.Background(), "s", "", 0)
	if len(recs) != 1000 {
		t.Errorf("%d records in s, want 1000", len(recs))
	}
}

// committing records what a brokers.Committer is told.
type committing struct {
	*memory.Stream
	mu  sync.Mutex
	got map[string]string // partition -> last position committed
	n   int
}

func (c *committing) Committed(_ context.Context, partition, position string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got[partition] = position
	c.n++
	return nil
}

// runAlone starts node n1, its only member, on the real clock, running
// source s of stream into store in batches of batchSize; it stops when the
// test ends.
func runAlone(t *testing.T, store persistence.Store, stream brokers.Stream, batchSize int) {
	t.Helper()
	ex := &exec.Goroutines{}
	n, err := Start(Env{Node: "n1", Clock: clock.Real{}, Rand: NewRand(1), Executor: ex, Store: store,
		Membership: static{[]placement.Member{{Name: "n1", State: placement.StateAlive}}}},
		[]SourceSpec{{Name: "s", Stream: stream, KeyField: "id", BatchSize: batchSize, MaxWait: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close(); ex.Wait() })
}

// A stream that records positions in the broker (Kafka's commit_to_group)
// is told the newest applied position, at most about once a second.
func TestCommitterGetsTheNewestPosition(t *testing.T) {
	st, _ := memory.NewStream(memory.StreamConfig{Partitions: 1})
	cs := &committing{Stream: st, got: map[string]string{}}
	runAlone(t, memstore.New(memstore.Config{}), cs, 10)
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; i < 100; i++ {
		_, _ = st.Produce("0", brokers.Message{Value: []byte(fmt.Sprintf(`{"id":"%d"}`, i))})
	}
	for {
		cs.mu.Lock()
		last, calls := cs.got["0"], cs.n
		cs.mu.Unlock()
		if last == "99" {
			if calls > 5 {
				t.Errorf("%d commits for a burst of 10 batches: not paced", calls)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("newest committed position %q after 10 s, want 99", last)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition with a deadline
	}
}

// refusing is a brokers.Committer that refuses for good, as a Kafka stream
// without commit_to_group does.
type refusing struct {
	*memory.Stream
	mu sync.Mutex
	n  int
}

func (r *refusing) Committed(context.Context, string, string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	return &brokers.Error{Op: "commit to group", Err: fmt.Errorf("no commit_to_group configured")}
}

// A Committer that refuses for good is asked once, not after every batch
// (each refusal was a WARN line, about one a second per unit).
func TestRefusingCommitterIsAskedOnce(t *testing.T) {
	st, _ := memory.NewStream(memory.StreamConfig{Partitions: 1})
	rs := &refusing{Stream: st}
	store := memstore.New(memstore.Config{})
	runAlone(t, store, rs, 1)
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; i < 30; i++ {
		_, _ = st.Produce("0", brokers.Message{Value: []byte(fmt.Sprintf(`{"id":"%d"}`, i))})
		// batches over more than a second, so that the pacing lets several through
		time.Sleep(50 * time.Millisecond) // spacing the load, not synchronisation
	}
	for {
		recs, _ := store.Records(context.Background(), "s", "", 0)
		if len(recs) == 30 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 30 records after 10 s", len(recs))
		}
		time.Sleep(10 * time.Millisecond) // polling a condition with a deadline
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.n != 1 {
		t.Fatalf("the refusing committer was asked %d times, want once", rs.n)
	}
}

// The sweep of an earlier process's leases leaves alone a lease a unit of
// this node acquired since it was listed (before, the sweep took it over
// with a new token and released it, fencing the live unit off).
func TestReleaseOwnLeavesAReacquiredLease(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(memstore.Config{})
	req := persistence.AcquireRequest{Unit: "s/0", Owner: "n1", TTL: time.Minute}
	earlier, err := store.Acquire(ctx, req) // the earlier process's, as listed
	if err != nil {
		t.Fatal(err)
	}
	live, err := store.Acquire(ctx, req) // this process's unit, since
	if err != nil {
		t.Fatal(err)
	}
	if !releaseOwn(ctx, store, earlier) {
		t.Fatal("a lease that moved on is to be tried again")
	}
	if _, err := store.Renew(ctx, live, time.Minute); err != nil {
		t.Fatalf("the live unit's lease after the sweep: %v", err)
	}
	// a lease still as listed is released
	if !releaseOwn(ctx, store, live) {
		t.Fatal("release failed")
	}
	ls, err := store.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		if l.Unit == "s/0" && l.Owner != "" {
			t.Fatalf("still held after release: %+v", l)
		}
	}
}
