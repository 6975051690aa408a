package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
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

// gateStore holds the first Apply of records until the test opens the gate, records
// every ApplyGroup, and takes the lease of the middle batch of the first
// group away before the group reaches the store (a takeover by another
// node at that moment).
type gateStore struct {
	*memstore.Store
	gate chan struct{}

	mu      sync.Mutex
	applies int
	held    bool       // the first batch of records came
	groups  [][]string // units of each ApplyGroup
	results [][]persistence.GroupResult
	stolen  string
}

func (s *gateStore) Apply(ctx context.Context, b *persistence.Batch) (persistence.Applied, error) {
	s.mu.Lock()
	s.applies++
	first := len(b.Ops) > 0 && !s.held // the first batch of records (not an open's start checkpoint)
	s.held = s.held || first
	s.mu.Unlock()
	if first {
		select {
		case <-s.gate:
		case <-ctx.Done():
			return persistence.Applied{}, ctx.Err()
		}
	}
	return s.Store.Apply(ctx, b)
}

func (s *gateStore) ApplyGroup(ctx context.Context, bs []*persistence.Batch) []persistence.GroupResult {
	units := make([]string, len(bs))
	for i, b := range bs {
		units[i] = b.Unit
	}
	s.mu.Lock()
	steal := len(s.groups) == 0 && len(bs) >= 3
	s.mu.Unlock()
	if steal {
		mid := bs[len(bs)/2].Unit
		if _, err := s.Store.Acquire(ctx, persistence.AcquireRequest{Unit: mid, Owner: "ghost", TTL: time.Hour, Live: []string{"ghost"}}); err != nil {
			panic(err)
		}
		s.mu.Lock()
		s.stolen = mid
		s.mu.Unlock()
	}
	rs := s.Store.ApplyGroup(ctx, bs)
	s.mu.Lock()
	s.groups = append(s.groups, units)
	s.results = append(s.results, rs)
	s.mu.Unlock()
	return rs
}

const parts, perPart = 4, 5

// readyStream is a stream of parts partitions with perPart messages in
// each: every unit has a batch ready at once.
func readyStream(t *testing.T) *memory.Stream {
	t.Helper()
	st, _ := memory.NewStream(memory.StreamConfig{Partitions: parts})
	for p := 0; p < parts; p++ {
		for i := 0; i < perPart; i++ {
			if _, err := st.Produce(fmt.Sprint(p), brokers.Message{Value: []byte(fmt.Sprintf(`{"id":"%d-%d"}`, p, i))}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return st
}

// Several units' batches ready while the store is busy share one
// ApplyGroup; the one whose lease was lost in it gets ErrLeaseLost (its
// unit stops) and the others are applied.
func TestGroupCommitSharesOneStoreCallAndIsolatesALostLease(t *testing.T) {
	st := readyStream(t)
	store := &gateStore{Store: memstore.New(memstore.Config{}), gate: make(chan struct{})}
	var mu sync.Mutex
	queued := 0
	ex := &exec.Goroutines{}
	env := Env{
		Node: "n1", Clock: clock.Real{}, Rand: NewRand(1), Executor: ex, Store: store,
		Membership: static{[]placement.Member{{Name: "n1", State: placement.StateAlive}}},
		Trace: func(e Event) {
			if e.Kind == "group-queued" {
				mu.Lock()
				queued++
				mu.Unlock()
			}
		},
		// the node never takes the stolen lease back during the test
		Tuning: Tuning{TakeoverMargin: time.Hour},
	}
	n, err := Start(env, []SourceSpec{{Name: "s", Stream: st, KeyField: "id", BatchSize: 50, MaxWait: 20 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { n.Close(); ex.Wait() }()

	waitUntil(t, "the other units' batches queue behind the first", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return queued == parts-1
	})
	close(store.gate)
	var stolen string
	waitUntil(t, "the group applied", func() bool {
		store.mu.Lock()
		defer store.mu.Unlock()
		stolen = store.stolen
		return len(store.results) > 0
	})
	store.mu.Lock()
	group, results := store.groups[0], store.results[0]
	store.mu.Unlock()
	if len(group) != parts-1 {
		t.Fatalf("first group = %v, want the %d batches queued behind the first", group, parts-1)
	}
	if u := slices.Compact(slices.Sorted(slices.Values(group))); len(u) != len(group) {
		t.Errorf("group %v holds a unit twice", group)
	}
	for i, r := range results {
		lost := errors.Is(r.Err, persistence.ErrLeaseLost)
		if (group[i] == stolen) != lost {
			t.Errorf("batch of %s in the group: err %v (stolen %s)", group[i], r.Err, stolen)
		}
	}
	// Every other unit applies all its messages; the stolen one none.
	waitUntil(t, "the other units applied", func() bool {
		rs, err := store.Records(context.Background(), "s", "", 0)
		return err == nil && len(rs) == (parts-1)*perPart
	})
	rs, _ := store.Records(context.Background(), "s", "", 0)
	for _, r := range rs {
		if r.Unit == stolen {
			t.Errorf("record %s of %s was applied after its lease was lost", r.Key, stolen)
		}
	}
	if cp, err := store.Checkpoint(context.Background(), stolen); err == nil && !brokers.IsMarker(cp.Position) {
		t.Errorf("checkpoint of %s moved past its start: %+v", stolen, cp)
	}
}

// With ApplyAlone (node.group_commit: false) no batch goes through
// ApplyGroup, however many are ready at once.
func TestApplyAloneNeverGroups(t *testing.T) {
	st := readyStream(t)
	store := &gateStore{Store: memstore.New(memstore.Config{}), gate: make(chan struct{})}
	close(store.gate)
	ex := &exec.Goroutines{}
	env := Env{
		Node: "n1", Clock: clock.Real{}, Rand: NewRand(1), Executor: ex, Store: store, ApplyAlone: true,
		Membership: static{[]placement.Member{{Name: "n1", State: placement.StateAlive}}},
	}
	n, err := Start(env, []SourceSpec{{Name: "s", Stream: st, KeyField: "id", BatchSize: 50, MaxWait: 20 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { n.Close(); ex.Wait() }()
	waitUntil(t, "everything applied", func() bool {
		rs, err := store.Records(context.Background(), "s", "", 0)
		return err == nil && len(rs) == parts*perPart
	})
	store.mu.Lock()
	defer store.mu.Unlock()
	if len(store.groups) != 0 || store.applies < parts {
		t.Errorf("%d ApplyGroup calls and %d Applies; want none and one per unit at least", len(store.groups), store.applies)
	}
}
