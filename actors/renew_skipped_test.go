package actors

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/actors/placement"
	"github.com/drover-dev/drover/brokers/memory"
	"github.com/drover-dev/drover/internal/clock"
	"github.com/drover-dev/drover/internal/exec"
	"github.com/drover-dev/drover/persistence"
	memstore "github.com/drover-dev/drover/persistence/memory"
)

// skippingStore answers every renewal round with one unit skipped (as a
// row locked by another transaction would be), and counts the leases
// renewed alone.
type skippingStore struct {
	persistence.Store
	mem  *memstore.Store
	unit string

	mu    sync.Mutex
	alone []string // units of each Renew
}

func (s *skippingStore) RenewLeasesChanges(ctx context.Context, owner string, ls []persistence.Lease, ttl time.Duration) (persistence.RenewAnswer, error) {
	i := slices.IndexFunc(ls, func(l persistence.Lease) bool { return l.Unit == s.unit })
	if i < 0 {
		return s.mem.RenewLeasesChanges(ctx, owner, ls, ttl)
	}
	rest := slices.Delete(slices.Clone(ls), i, i+1)
	a, err := s.mem.RenewLeasesChanges(ctx, owner, rest, ttl)
	a.Skipped = append(a.Skipped, s.unit) // the others' lists hold no s.unit
	return a, err
}

func (s *skippingStore) Renew(ctx context.Context, l persistence.Lease, ttl time.Duration) (persistence.Lease, error) {
	s.mu.Lock()
	s.alone = append(s.alone, l.Unit)
	s.mu.Unlock()
	return s.mem.Renew(ctx, l, ttl)
}

func (s *skippingStore) renewedAlone() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.alone)
}

// TestLeaserRenewsASkippedLeaseAlone: a lease a round skipped (its row
// locked) is renewed alone, in a job of its own, and only that one.
func TestLeaserRenewsASkippedLeaseAlone(t *testing.T) {
	const parts = 4
	mem := memstore.New(memstore.Config{})
	st := &skippingStore{Store: mem, mem: mem, unit: "s/2"}
	stream, _ := memory.NewStream(memory.StreamConfig{Partitions: parts})
	ex := &exec.Goroutines{}
	n, err := Start(Env{Node: "n1", Clock: clock.Real{}, Rand: NewRand(1), Executor: ex, Store: st,
		Membership: static{[]placement.Member{{Name: "n1", State: placement.StateAlive}}},
		Tuning:     Tuning{RenewInterval: 20 * time.Millisecond}},
		[]SourceSpec{{Name: "s", Stream: stream, KeyField: "id", BatchSize: 10, MaxWait: time.Hour, LeaseTTL: 3 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close(); ex.Wait() })
	waitUntilf(t, func() string { return fmt.Sprintf("renewed alone: %v", st.renewedAlone()) },
		func() bool { return len(st.renewedAlone()) >= 2 })
	for _, u := range st.renewedAlone() {
		if u != "s/2" {
			t.Fatalf("renewed alone %v, want only the skipped s/2", st.renewedAlone())
		}
	}
}
