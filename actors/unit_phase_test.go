package actors

import (
	"fmt"
	"testing"
)

func TestTreeStateOfPhase(t *testing.T) {
	want := map[unitPhase]string{
		phaseStarting:  StateStarting,
		phaseAcquiring: StateAcquiring,
		phaseRunning:   StateRunning,
		phaseRetrying:  StateRetrying,
		phasePaused:    StatePaused,
		phaseStopping:  StateStopping,
		phaseReleasing: "", // keeps what the entry shows
		phaseStopped:   StateStopped,
	}
	for p := phaseStarting; p <= phaseStopped; p++ {
		got, ok := treeState(p)
		if got != want[p] || ok != (want[p] != "") {
			t.Errorf("%s: tree state %q (%v), want %q", p, got, ok, want[p])
		}
	}
}

// TestPhaseTransitions walks every pair of phases: the allowed ones enter
// the phase and show it in the unit's tree entry, the others panic and
// leave the phase as it was.
func TestPhaseTransitions(t *testing.T) {
	become := map[unitPhase]func(*unitActor){
		phaseStarting:  func(u *unitActor) { u.becomeStarting(nil) },
		phaseAcquiring: (*unitActor).becomeAcquiring,
		phaseRunning:   (*unitActor).becomeRunning,
		phaseRetrying:  func(u *unitActor) { u.becomeRetrying(nil) },
		phasePaused:    (*unitActor).becomePaused,
		phaseStopping:  (*unitActor).becomeStopping,
		phaseReleasing: (*unitActor).becomeReleasing,
		phaseStopped:   func(u *unitActor) { u.becomeStopped(nil) },
	}
	s, ac, ru, re, pa, sp, rl := phaseStarting, phaseAcquiring, phaseRunning, phaseRetrying, phasePaused, phaseStopping, phaseReleasing
	allowed := map[unitPhase][]unitPhase{
		phaseStarting:  {phaseNew, s, re},
		phaseAcquiring: {s, ac, re},
		phaseRunning:   {phaseNew, ac, ru, re, pa}, // from new: spawned from a passive unit's record
		phaseRetrying:  {s, ac, ru, re},
		phasePaused:    {ru, re},
		phaseStopping:  {s, ac, ru, re, pa},
		phaseReleasing: {ac, ru, re, sp},
		phaseStopped:   {s, ac, ru, re, pa, sp, rl},
	}
	for to := phaseStarting; to <= phaseStopped; to++ {
		// before is a state entering to does not show: the entry keeps it
		// unless a write reaches it
		before := StateStopped
		if st, _ := treeState(to); st == before {
			before = StateStarting
		}
		ok := map[unitPhase]bool{}
		for _, p := range allowed[to] {
			ok[p] = true
		}
		for from := phaseNew; from <= phaseStopped; from++ {
			t.Run(fmt.Sprintf("%s→%s", from, to), func(t *testing.T) {
				reg := newRegistry("n1")
				reg.addSource("s", "memory")
				u := &unitActor{node: &nodeEnv{reg: reg}, spec: &SourceSpec{Name: "s"}, id: "s/0", gen: reg.addUnit("s", "s/0")}
				u.status(func(s *treeUnit) { s.setState(before) })
				u.phase = from
				panicked := func() (p bool) {
					defer func() { p = recover() != nil }()
					become[to](u)
					return false
				}()
				state := reg.snapshot()[0].Units[0].State
				if ok[from] {
					wantState, shows := treeState(to)
					if !shows {
						wantState = before
					}
					if panicked || u.phase != to || state != wantState {
						t.Errorf("allowed: panicked %v, phase %s, tree %q; want %s, %q", panicked, u.phase, state, to, wantState)
					}
					return
				}
				if !panicked || u.phase != from || state != before {
					t.Errorf("not allowed: panicked %v, phase %s, tree %q; want a panic, %s, %q", panicked, u.phase, state, from, before)
				}
			})
		}
	}
}
