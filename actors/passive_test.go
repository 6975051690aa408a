package actors

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
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

// passiveWorld is a node of one memory stream source "s" whose idle units
// passivate after 50 ms (the safety timer is an hour: only the Waker
// wakes them), with its trace.
type passiveWorld struct {
	t      *testing.T
	st     *memory.Stream
	open   *openReaders
	store  *memstore.Store
	n      *Node
	ex     *exec.Goroutines
	mu     sync.Mutex
	events []Event
}

func newPassiveWorld(t *testing.T, parts int, tweak ...func(*Tuning)) *passiveWorld {
	t.Helper()
	return newPassiveWorldOf(t, parts, false, tweak...)
}

// newPassiveWorldOf is newPassiveWorld whose readers are deaf (see
// openReaders) from the first one on.
func newPassiveWorldOf(t *testing.T, parts int, deaf bool, tweak ...func(*Tuning)) *passiveWorld {
	t.Helper()
	return newPassiveWorldFailing(t, parts, deaf, nil, tweak...)
}

// newPassiveWorldFailing is newPassiveWorldOf whose readers' opens fail
// with failOpen's error (nil: they do not).
func newPassiveWorldFailing(t *testing.T, parts int, deaf bool, failOpen func(string) error, tweak ...func(*Tuning)) *passiveWorld {
	t.Helper()
	tuning := Tuning{WakeSafety: time.Hour, PassivateAfter: 50 * time.Millisecond, RenewInterval: 100 * time.Millisecond,
		TakeoverMargin: 100 * time.Millisecond, LeaseLostPause: 100 * time.Millisecond}
	for _, f := range tweak {
		f(&tuning)
	}
	w := &passiveWorld{t: t, ex: &exec.Goroutines{}}
	w.st, _ = memory.NewStream(memory.StreamConfig{Partitions: parts})
	w.open = &openReaders{Stream: w.st, deaf: deaf, failOpen: failOpen}
	w.store = memstore.New(memstore.Config{})
	n, err := Start(Env{Node: "n1", Clock: clock.Real{}, Rand: NewRand(1), Executor: w.ex, Store: w.store,
		Membership: static{[]placement.Member{{Name: "n1", State: placement.StateAlive}}},
		Trace: func(e Event) {
			w.mu.Lock()
			w.events = append(w.events, e)
			w.mu.Unlock()
		},
		Tuning: tuning},
		[]SourceSpec{{Name: "s", Stream: w.open, KeyField: "id", BatchSize: 10, MaxWait: time.Hour, LeaseTTL: 3 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	w.n = n
	t.Cleanup(func() { n.Close(); w.ex.Wait() })
	return w
}

// openReaders is the memory stream, counting the readers open (not
// closed yet).
type openReaders struct {
	*memory.Stream
	n atomic.Int64
	// deaf: the readers' Wakers miss every call but the one made at once
	// (a broker that misses calls, which WakeSafety guards against).
	deaf bool
	// failOpen, when set, is the error of every open of its partition.
	failOpen func(partition string) error
}

func (s *openReaders) Open(ctx context.Context, partition string, start brokers.Start) (brokers.Reader, error) {
	if s.failOpen != nil {
		if err := s.failOpen(partition); err != nil {
			return nil, err
		}
	}
	r, err := s.OpenReader(ctx, partition, start)
	if err != nil {
		return nil, err
	}
	s.n.Add(1)
	if s.deaf {
		return &deafReader{countedReader{Reader: r, s: s}}, nil
	}
	return &countedReader{Reader: r, s: s}, nil
}

// countedReader is a memory reader (a brokers.Waker) whose Close counts.
type countedReader struct {
	*memory.Reader
	s    *openReaders
	once sync.Once
}

func (r *countedReader) Close() error {
	r.once.Do(func() { r.s.n.Add(-1) })
	return r.Reader.Close()
}

func (w *passiveWorld) units() []UnitStatus {
	var out []UnitStatus
	for _, src := range w.n.Tree().Sources {
		out = append(out, src.Units...)
	}
	return out
}

func (w *passiveWorld) count(f func(UnitStatus) bool) int {
	k := 0
	for _, u := range w.units() {
		if f(u) {
			k++
		}
	}
	return k
}

// unitActors counts the unit actors the node's actor system holds.
func (w *passiveWorld) unitActors() int {
	k := 0
	for _, m := range w.n.node.system.ProcessRegistry.LocalPIDs.LocalPIDs {
		for _, id := range m.Keys() {
			if strings.HasPrefix(id, "node/source-s") && strings.Count(id, "/") == 2 {
				k++
			}
		}
	}
	return k
}

func (w *passiveWorld) traced(kind, unit string) []Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []Event
	for _, e := range w.events {
		if e.Kind == kind && (unit == "" || e.Unit == unit) {
			out = append(out, e)
		}
	}
	return out
}

func (w *passiveWorld) state() string {
	return fmt.Sprintf("%d unit actors, %d readers open; tree %+v", w.unitActors(), w.open.n.Load(), w.units())
}

// idlePassive: every unit of the tree is a passive running unit holding
// a lease, and no unit actor is left.
func (w *passiveWorld) idlePassive(parts int) bool {
	return w.count(func(u UnitStatus) bool {
		return u.Passive && u.State == StateRunning && u.LeaseToken != 0 && u.LastPullAt != nil
	}) == parts && w.unitActors() == 0
}

// Without passivation every idle unit keeps its actor (what
// unitActors counts).
func TestNoPassivateKeepsActors(t *testing.T) {
	const parts = 4
	w := newPassiveWorld(t, parts, func(t *Tuning) { t.NoPassivate = true })
	waitUntilf(t, w.state, func() bool {
		return w.count(func(u UnitStatus) bool { return u.State == StateRunning && u.LastPullAt != nil }) == parts
	})
	if n := w.unitActors(); n != parts {
		t.Errorf("%d unit actors, want %d: %s", n, parts, w.state())
	}
	if n := w.count(func(u UnitStatus) bool { return u.Passive }); n != 0 {
		t.Errorf("%d passive units with NoPassivate", n)
	}
}

// Idle units passivate: the tree shows each as an idle running unit
// holding its lease (marked passive), and no unit actor is left; a publish
// wakes each (its actor spawned again from the record), the messages are
// applied, and they passivate again.
func TestIdleUnitsPassivateAndAreWoken(t *testing.T) {
	const parts = 8
	w := newPassiveWorld(t, parts)
	waitUntilf(t, w.state, func() bool { return w.idlePassive(parts) })
	tokens := map[string]int64{}
	for _, u := range w.units() {
		tokens[u.Unit] = u.LeaseToken
	}
	for p := 0; p < parts; p++ {
		for i := 0; i < 3; i++ {
			if _, err := w.st.Produce(fmt.Sprint(p), brokers.Message{Value: []byte(fmt.Sprintf(`{"id":"%d-%d"}`, p, i))}); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitUntilf(t, w.state, func() bool { return w.count(func(u UnitStatus) bool { return u.Applied == 3 }) == parts })
	waitUntilf(t, w.state, func() bool { return w.idlePassive(parts) })
	for _, u := range w.units() {
		if u.LeaseToken != tokens[u.Unit] {
			t.Errorf("%s: lease token %d after the wake, want %d (the same lease, never released)", u.Unit, u.LeaseToken, tokens[u.Unit])
		}
	}
	if n := len(w.traced("activated", "")); n < parts {
		t.Errorf("%d activations, want at least %d", n, parts)
	}
}

// A lease lost while the unit is passive is noticed (the leaser tells its
// supervisor, which spawns it to give the lease up): the unit stops
// holding it, and nothing is applied under the lost token.
func TestLeaseLostWhilePassive(t *testing.T) {
	// n2 is no member of n1's view: with the default margin n1 would take
	// its lease over as stale once RenewInterval+TakeoverMargin passed
	// without n2 renewing, and on a loaded machine n1's next Acquire comes
	// later than that. n2 holds it for the whole test.
	w := newPassiveWorld(t, 1, func(tu *Tuning) { tu.TakeoverMargin = time.Hour })
	waitUntilf(t, w.state, func() bool { return w.idlePassive(1) })
	u := w.units()[0]
	// another node takes the lease over (as one that sees n1 gone would)
	l, err := w.store.Acquire(context.Background(), persistence.AcquireRequest{Unit: u.Unit, Owner: "n2", TTL: time.Minute, Live: []string{"n2"}})
	if err != nil {
		t.Fatal(err)
	}
	waitUntilf(t, w.state, func() bool {
		for _, e := range w.traced("lease-lost", u.Unit) {
			if strings.Contains(e.Detail, fmt.Sprintf("token=%d at=renew", u.LeaseToken)) {
				return true
			}
		}
		return false
	})
	if _, err := w.st.Produce("0", brokers.Message{Value: []byte(`{"id":"x"}`)}); err != nil {
		t.Fatal(err)
	}
	// n2 holds it (it is alive and renews for all n1 knows: the lease is
	// a minute long): n1 waits for it and applies nothing
	waitUntilf(t, w.state, func() bool {
		got := w.units()
		return len(got) == 1 && !got[0].Passive && got[0].State == StateAcquiring && strings.Contains(got[0].LastError, "held")
	})
	for _, e := range w.traced("applied", u.Unit) {
		t.Errorf("applied after the lease was lost: %+v", e)
	}
	cur, err := w.store.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(cur) != 1 || cur[0].Owner != "n2" || cur[0].Token != l.Token {
		t.Errorf("leases %+v, want n2's token %d", cur, l.Token)
	}
}

// A drain (SIGTERM) stops passive units as it stops the others: each is
// spawned to release its lease.
func TestDrainReleasesPassiveUnits(t *testing.T) {
	const parts = 4
	w := newPassiveWorld(t, parts)
	waitUntilf(t, w.state, func() bool { return w.idlePassive(parts) })
	select {
	case <-w.n.Drain():
	case <-time.After(20 * time.Second):
		t.Fatalf("not drained: %s", w.state())
	}
	cur, err := w.store.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range cur {
		if l.Owner != "" {
			t.Errorf("lease of %s still held by %s after the drain", l.Unit, l.Owner)
		}
	}
	if n := len(w.traced("released", "")); n != parts {
		t.Errorf("%d releases, want %d", n, parts)
	}
	waitUntilf(t, w.state, func() bool { return w.open.n.Load() == 0 })
}

// A supervisor that fails while its units are passive ends them as it
// ends its running units (leases released, readers closed); its next
// instance runs them again, and they passivate again.
func TestSupervisorCrashWithPassiveUnits(t *testing.T) {
	const parts = 4
	w := newPassiveWorld(t, parts)
	waitUntilf(t, w.state, func() bool { return w.idlePassive(parts) })
	w.n.CrashSupervisor("s")
	waitUntilf(t, w.state, func() bool { return len(w.traced("acquired", "")) >= 2*parts })
	// the first instance's readers closed, the second's open
	waitUntilf(t, w.state, func() bool { return w.idlePassive(parts) && w.open.n.Load() == parts })
	if _, err := w.st.Produce("0", brokers.Message{Value: []byte(`{"id":"y"}`)}); err != nil {
		t.Fatal(err)
	}
	waitUntilf(t, w.state, func() bool { return w.count(func(u UnitStatus) bool { return u.Applied == 1 }) == 1 })
}
