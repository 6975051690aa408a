package actors

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/drover-dev/drover/brokers"
)

// peakStarting is the most start slots the node's units held at once.
func (w *passiveWorld) peakStarting() int {
	g := w.n.node.starts
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.peak
}

// A cold start of many units keeps at most MaxStarting of them starting
// at once, starts every one, and the units started while others waited
// passivate at once (PassivateAfter is an hour here), so the actors alive
// stay about as many as the slots.
func (w *passiveWorld) brief() string {
	return fmt.Sprintf("%d unit actors, %d readers open, %d passive, %d running", w.unitActors(), w.open.n.Load(),
		w.count(func(u UnitStatus) bool { return u.Passive }), w.count(func(u UnitStatus) bool { return u.State == StateRunning }))
}

func TestStartGateBoundsUnitsStarting(t *testing.T) {
	const parts, slots = 40, 3
	w := newPassiveWorld(t, parts, func(t *Tuning) { t.MaxStarting = slots; t.PassivateAfter = time.Hour })
	waitUntilf(t, w.brief, func() bool {
		return w.count(func(u UnitStatus) bool { return u.State == StateRunning && u.LeaseToken != 0 && u.LastPullAt != nil }) == parts
	})
	if p := w.peakStarting(); p > slots || p == 0 {
		t.Errorf("%d units starting at once at most, want 1 to %d", p, slots)
	}
	// those that reached their first idle moment while others waited
	// passivated then; only the last few (the last spawned, and those
	// whose first fetch was still in flight when the queue emptied) wait
	// out PassivateAfter
	if n := w.count(func(u UnitStatus) bool { return u.Passive }); n < parts-4*slots {
		t.Errorf("%d passive units, want at least %d: %s", n, parts-4*slots, w.brief())
	}
	if n := w.unitActors(); n > 4*slots {
		t.Errorf("%d unit actors alive, want at most %d", n, 4*slots)
	}
	// woken, they apply what arrives
	for p := range parts {
		if _, err := w.st.Produce(fmt.Sprint(p), brokers.Message{Value: []byte(fmt.Sprintf(`{"id":"%d"}`, p))}); err != nil {
			t.Fatal(err)
		}
	}
	waitUntilf(t, w.brief, func() bool { return w.count(func(u UnitStatus) bool { return u.Applied == 1 }) == parts })
}

// A unit that cannot start (its broker refuses the open, for ever) gives
// its slot back when it goes retrying: with one slot, every other unit
// still starts.
func TestStartGateRetryingUnitDoesNotBlockOthers(t *testing.T) {
	const parts = 6
	refused := errors.New("partition 0 is unreachable")
	w := newPassiveWorldFailing(t, parts, false, func(p string) error {
		if p == "0" {
			return refused
		}
		return nil
	}, func(t *Tuning) { t.MaxStarting = 1; t.RetryBase = time.Hour; t.RetryCap = time.Hour })
	waitUntilf(t, w.brief, func() bool {
		return w.count(func(u UnitStatus) bool { return u.State == StateRunning && u.LastPullAt != nil }) == parts-1 &&
			w.count(func(u UnitStatus) bool { return u.State == StateRetrying }) == 1
	})
	if p := w.peakStarting(); p != 1 {
		t.Errorf("%d units starting at once at most, want 1", p)
	}
}

// A supervisor whose take failed, and whose wait comes after every slot
// was given back (by releases that found nobody to tell), is not left
// waiting for a call that never comes: wait says a slot is free.
func TestStartGateWaitAfterTheLastRelease(t *testing.T) {
	g := newStartGate(2)
	if !g.take() || !g.take() || g.take() {
		t.Fatal("a gate of 2 slots should give exactly 2")
	}
	var told int
	send := func(*actor.PID, any) { told++ }
	g.release(send)
	g.release(send)
	if told != 0 {
		t.Fatalf("told %d supervisors with none waiting", told)
	}
	pid := actor.NewPID("node", "source-s")
	if !g.wait(pid, 3) {
		t.Fatal("wait after the last release: want free (take again), got a wait for a call that never comes")
	}
	if !g.take() || !g.take() || g.take() {
		t.Fatal("both slots should be free again")
	}
	if g.wait(pid, 1) {
		t.Fatal("wait with every slot held: want queued")
	}
	if !g.contended() {
		t.Fatal("a supervisor with queued units: want contended")
	}
	g.release(send)
	if told != 1 {
		t.Fatalf("told %d supervisors after a release, want 1", told)
	}
	g.wait(pid, 0)
	if g.contended() {
		t.Fatal("nothing queued: want not contended")
	}
}
