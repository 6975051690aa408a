package actors

import (
	"fmt"
	"slices"
	"time"
)

// unitPhase is where a unit actor is in its life cycle (architecture §13).
// The becomeX methods below are its only writers; each checks that the
// unit comes from a phase the life cycle allows, and a transition it does
// not allow is a bug of this package: it panics, which fails the unit to
// its supervisor like any panic of an actor.
//
//	phase      entered when                                   from
//	starting   the actor started; parents not finished yet        new, starting, retrying
//	acquiring  no parents or all finished; the lease asked again  starting, acquiring, retrying
//	running    an open succeeded; a retrying unit's fetch/apply   acquiring, running, retrying;
//	           succeeded; spawned from a passive unit's record    new
//	retrying   a step failed below the limit; on_position_reset   starting, acquiring, running,
//	           fail waits for an operator                         retrying
//	paused     about to fetch, its unit or source paused          running, retrying
//	           (controls.go); running again when resumed          (running: from paused)
//	stopping   stopUnit                                           starting … retrying, paused
//	releasing  a stop or the partition's end, lease held          acquiring … stopping
//	stopped    the actor stops (a restart is no transition)       any but new
//
// A unit that passivates stops its actor in running, which is no
// transition either: the unit goes on without one (unit_passive.go), and
// the actor spawned from its record enters running from new.
//
// Not phases, because they are concurrent with the phase:
//   - the main-line job in flight (parents, acquire, open, fetch, apply,
//     ack, nack: inflight, cancelFetch): a running or retrying unit opens,
//     fetches, applies and acks, and a stop waits for the job it finds;
//   - the lease (holdsLease): held from a won Acquire to the release,
//     across running, retrying, stopping and releasing;
//   - recovering: a failure since the last success, across the phases
//     from retrying back to the first successful fetch or apply;
//   - waitNoteShown: last_error holds a wait (parents, a lease held
//     elsewhere), which a stop can find;
//   - healthReported: the supervisor was told the unit ran long enough.
//
// Renewals are not the unit's: the leaser renews every lease of the node
// and reports a lost one (leaseLostNote).
type unitPhase int

const (
	phaseNew       unitPhase = iota // spawned, not started
	phaseStarting                   // checking its parents (Kinesis child shards), or waiting for them to finish
	phaseAcquiring                  // asking for the lease, or waiting for its holder to let go
	phaseRunning                    // lease held: open, fetch, apply, ack
	phaseRetrying                   // a step failed: waiting out the backoff, then that step again until one succeeds
	phasePaused                     // an operator paused it: lease held, reader open, nothing fetched (controls.go)
	phaseStopping                   // asked to stop: the job in flight finishes (an apply) or is cancelled (a fetch)
	phaseReleasing                  // releasing the lease; the actor stops when the store answers
	phaseStopped                    // stopped: its jobs and timers are cancelled
)

var phaseNames = [...]string{"new", "starting", "acquiring", "running", "retrying", "paused", "stopping", "releasing", "stopped"}

func (p unitPhase) String() string {
	if p < 0 || int(p) >= len(phaseNames) {
		return fmt.Sprintf("unitPhase(%d)", int(p))
	}
	return phaseNames[p]
}

// stopping: the unit was asked to stop, or finished; it goes nowhere but
// to stopped.
func (p unitPhase) stopping() bool { return p >= phaseStopping }

// treeState is the state the unit's tree entry shows in phase p (the tree
// JSON is a contract, architecture §10). Releasing shows none of its own:
// the entry keeps what it showed, stopping after a stopUnit, the last state
// of the main line for a unit that finished.
func treeState(p unitPhase) (state string, ok bool) {
	switch p {
	case phaseStarting:
		return StateStarting, true
	case phaseAcquiring:
		return StateAcquiring, true
	case phaseRunning:
		return StateRunning, true
	case phaseRetrying:
		return StateRetrying, true
	case phasePaused:
		return StatePaused, true
	case phaseStopping:
		return StateStopping, true
	case phaseStopped:
		return StateStopped, true
	}
	return "", false
}

// mainLine are the phases before a stop.
var mainLine = []unitPhase{phaseStarting, phaseAcquiring, phaseRunning, phaseRetrying}

// become enters phase to, which only the phases phaseFrom[to] may lead
// to, and shows it in the tree with the fields more sets, in one write.
func (u *unitActor) become(to unitPhase, more func(*treeUnit)) {
	if !slices.Contains(phaseFrom[to], u.phase) {
		panic(fmt.Sprintf("unit %s: phase %s cannot follow %s", u.id, to, u.phase))
	}
	if observe := u.node.observePhase; observe != nil {
		observe(u.id, u.phase, to)
	}
	u.phase = to
	if to >= phaseRetrying {
		u.releaseStart() // failed, paused or stopping: no longer starting
	}
	u.show(to, more)
}

// show writes phase p's state (if it has one) and the fields more sets to
// the tree. Apart from become, only an open that succeeds during a stop
// calls it, with the phase it is in (stopping, not running): the fetch it
// would start ends the stop instead.
func (u *unitActor) show(p unitPhase, more func(*treeUnit)) {
	state, ok := treeState(p)
	if !ok && more == nil {
		return // no write at all: not even an empty one (mutate.GhostUnits creates entries on any write)
	}
	u.status(func(s *treeUnit) {
		if ok {
			s.setState(state)
		}
		if more != nil {
			more(s)
		}
	})
}

// noRetryAt clears next_retry_at: every phase but retrying shows none
// (releasing writes nothing and keeps what the entry shows).
func noRetryAt(s *treeUnit) { s.setNextRetry(time.Time{}) }

// andNoRetryAt is more, then noRetryAt.
func andNoRetryAt(more func(*treeUnit)) func(*treeUnit) {
	if more == nil {
		return noRetryAt
	}
	return func(s *treeUnit) { more(s); noRetryAt(s) }
}

// phaseFrom is the life cycle: the phases each phase may be entered from.
var phaseFrom = map[unitPhase][]unitPhase{
	phaseStarting:  {phaseNew, phaseStarting, phaseRetrying},
	phaseAcquiring: {phaseStarting, phaseAcquiring, phaseRetrying},
	phaseRunning:   {phaseNew, phaseAcquiring, phaseRunning, phaseRetrying, phasePaused},
	phaseRetrying:  mainLine,
	phasePaused:    {phaseRunning, phaseRetrying},
	phaseStopping:  append(slices.Clone(mainLine), phasePaused),
	phaseReleasing: {phaseAcquiring, phaseRunning, phaseRetrying, phaseStopping},
	phaseStopped:   append(slices.Clone(mainLine), phasePaused, phaseStopping, phaseReleasing),
}

// becomeStarting: the actor started, or its parents are not finished yet.
func (u *unitActor) becomeStarting(more func(*treeUnit)) {
	u.become(phaseStarting, andNoRetryAt(more))
}

// becomeAcquiring: no parents, or all finished; or the lease is asked for
// again (held elsewhere, or after a failure).
func (u *unitActor) becomeAcquiring() {
	u.become(phaseAcquiring, noRetryAt)
}

// becomeRunning: an open succeeded, or a retrying unit's fetch or apply did.
func (u *unitActor) becomeRunning() {
	u.become(phaseRunning, noRetryAt)
}

// becomeRetrying: a step failed below the failure limit, or the checkpoint
// waits for an operator (on_position_reset: fail).
func (u *unitActor) becomeRetrying(more func(*treeUnit)) {
	u.become(phaseRetrying, more)
}

// becomePaused: the unit was about to fetch and is paused (controls.go).
func (u *unitActor) becomePaused() {
	u.become(phasePaused, noRetryAt)
}

// becomeStopping: stopUnit.
func (u *unitActor) becomeStopping() {
	u.become(phaseStopping, noRetryAt)
}

// becomeReleasing: a stop (or the end of the unit's partition) reached a
// step boundary with the lease held.
func (u *unitActor) becomeReleasing() {
	u.become(phaseReleasing, nil)
}

// becomeStopped: the actor stops (not a restart: that discards the
// instance in whatever phase it is, and its successor starts anew).
func (u *unitActor) becomeStopped(more func(*treeUnit)) {
	u.become(phaseStopped, andNoRetryAt(more))
}
