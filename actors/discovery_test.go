package actors

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/actors/placement"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/memory"
	"github.com/drover-dev/drover/internal/clock"
	"github.com/drover-dev/drover/internal/exec"
	memstore "github.com/drover-dev/drover/persistence/memory"
)

// heldListing holds one Partitions call, after it took its listing, until
// released: a ListShards that is slow to answer.
type heldListing struct {
	*memory.Stream
	mu      sync.Mutex
	hold    bool
	taken   chan struct{}
	release chan struct{}
}

func (s *heldListing) Partitions(ctx context.Context) ([]brokers.Partition, error) {
	ps, err := s.Stream.Partitions(ctx)
	s.mu.Lock()
	hold := s.hold
	s.hold = false
	s.mu.Unlock()
	if hold {
		close(s.taken)
		<-s.release
	}
	return ps, err
}

// Discovery jobs may overlap. A listing taken before a split that arrives
// after the parent finished must be dropped: applied, it would make the
// supervisor take the finished parent for a partition of a recreated
// stream ("finished-stale"), read again from its earliest, every message
// applied twice (found by review: 20 messages applied 40 to 360 times).
func TestLateListingDoesNotReopenAFinishedParent(t *testing.T) {
	inner, _ := memory.NewStream(memory.StreamConfig{Partitions: 1})
	st := &heldListing{Stream: inner, taken: make(chan struct{}), release: make(chan struct{})}
	store := memstore.New(memstore.Config{})
	ex := &exec.Goroutines{}
	var mu sync.Mutex
	var events []Event
	env := Env{
		Node: "n1", Clock: clock.Real{}, Rand: NewRand(1), Executor: ex, Store: store,
		Membership: static{[]placement.Member{{Name: "n1", State: placement.StateAlive}}},
		Trace: func(e Event) {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, e)
		},
	}
	n, err := Start(env, []SourceSpec{{Name: "s", Stream: st, KeyField: "id", BatchSize: 50, MaxWait: 20 * time.Millisecond, Discovery: 100 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { n.Close(); ex.Wait() }()
	for i := 0; i < 20; i++ {
		_, _ = inner.Produce("0", brokers.Message{Value: []byte(fmt.Sprintf(`{"id":"%d"}`, i))})
	}
	waitFor := func(what string, cond func() bool) { t.Helper(); waitUntil(t, what, cond) }
	applied := func(unit string) (k int64) {
		for _, src := range n0(n) {
			for _, u := range src.Units {
				if u.Unit == unit {
					k += u.Applied
				}
			}
		}
		return k
	}
	waitFor("20 applied on s/0", func() bool { return applied("s/0") == 20 })
	st.mu.Lock()
	st.hold = true
	st.mu.Unlock()
	waitFor("held listing", func() bool {
		select {
		case <-st.taken:
			return true
		default:
			return false
		}
	})
	if _, err := inner.Split("0"); err != nil {
		t.Fatal(err)
	}
	waitFor("s/0 finished", func() bool {
		cp, err := store.Checkpoint(context.Background(), "s/0")
		return err == nil && cp.Finished
	})
	waitFor("children running", func() bool { return applied("s/1") >= 0 && len(n0(n)[0].Units) >= 2 })
	close(st.release)
	waitFor("the late listing dropped", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range events {
			if e.Kind == "discovery-dropped" {
				return true
			}
		}
		return false
	})
	mu.Lock()
	defer mu.Unlock()
	ops := 0
	for _, e := range events {
		if e.Unit == "s/0" && (e.Kind == "finished-stale" || e.Kind == "position-reset") {
			t.Errorf("%s %s %s", e.Kind, e.Unit, e.Detail)
		}
		var tok, k int
		if e.Unit == "s/0" && e.Kind == "applied" {
			if _, err := fmt.Sscanf(e.Detail, "token=%d ops=%d", &tok, &k); err == nil {
				ops += k
			}
		}
	}
	if ops != 20 {
		t.Errorf("s/0's 20 messages applied %d times in all", ops)
	}
	cp, _ := store.Checkpoint(context.Background(), "s/0")
	if !cp.Finished {
		t.Errorf("checkpoint of the finished parent is %+v: reset, read again", cp)
	}
}

func n0(n *Node) []SourceStatus { return n.Tree().Sources }
