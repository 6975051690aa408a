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

// countingExecutor runs jobs on goroutines and counts those in flight by
// label (exec.Label).
type countingExecutor struct {
	exec.Goroutines
	mu       sync.Mutex
	inFlight map[string]int
}

func (e *countingExecutor) Go(ctx context.Context, job func(context.Context) any, deliver func(any)) context.CancelFunc {
	label := exec.Label(ctx)
	e.mu.Lock()
	e.inFlight[label]++
	e.mu.Unlock()
	return e.Goroutines.Go(ctx, job, func(v any) {
		e.mu.Lock()
		e.inFlight[label]--
		e.mu.Unlock()
		deliver(v)
	})
}

func (e *countingExecutor) count(label string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.inFlight[label]
}

// Idle units on the memory stream (a brokers.Waker) park no fetch: with a
// max_wait of an hour, a unit that polled would keep a fetch job in flight
// all that time. A publish wakes each unit at once (the safety timer is an
// hour too).
func TestIdleMemoryUnitsHaveNoFetchInFlight(t *testing.T) {
	const parts = 8
	st, _ := memory.NewStream(memory.StreamConfig{Partitions: parts})
	store := memstore.New(memstore.Config{})
	ex := &countingExecutor{inFlight: map[string]int{}}
	n, err := Start(Env{Node: "n1", Clock: clock.Real{}, Rand: NewRand(1), Executor: ex, Store: store,
		Membership: static{[]placement.Member{{Name: "n1", State: placement.StateAlive}}},
		Tuning:     Tuning{WakeSafety: time.Hour}},
		[]SourceSpec{{Name: "s", Stream: st, KeyField: "id", BatchSize: 10, MaxWait: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { n.Close(); ex.Wait() }()
	units := func(f func(UnitStatus) bool) int {
		k := 0
		for _, src := range n.Tree().Sources {
			for _, u := range src.Units {
				if f(u) {
					k++
				}
			}
		}
		return k
	}
	state := func() string {
		return fmt.Sprintf("%d fetch jobs in flight; tree %+v", ex.count("fetch"), n.Tree())
	}
	waitUntilf(t, state, func() bool {
		return units(func(u UnitStatus) bool { return u.State == StateRunning && u.LastPullAt != nil }) == parts && ex.count("fetch") == 0
	})
	for p := 0; p < parts; p++ {
		for i := 0; i < 3; i++ {
			if _, err := st.Produce(fmt.Sprint(p), brokers.Message{Value: []byte(fmt.Sprintf(`{"id":"%d-%d"}`, p, i))}); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitUntilf(t, state, func() bool { return units(func(u UnitStatus) bool { return u.Applied == 3 }) == parts })
	// idle again: still no fetch parked
	waitUntilf(t, state, func() bool { return ex.count("fetch") == 0 && ex.count("apply") == 0 })
}
