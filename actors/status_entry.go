package actors

import (
	"slices"
	"time"
)

// treeUnit is a unit's entry in the tree as the registry keeps it, one per
// unit, idle or not: UnitStatus held whole took 240 bytes, and a new 24-byte
// allocation for each time set (a renewed lease's expiry on every
// extension). What a snapshot can supply is not kept: the unit id (the
// key of its source's map), the node (the registry's), lag_seconds (made
// from the lag when the tree is read). The state is an index, the times
// that change often are stamps, and the fields most units never set sit
// behind one pointer. UnitStatus is built from it when the tree is read
// (status); the two show the same.
type treeUnit struct {
	position                 string
	leaseToken               int64
	leaseExpires             stamp // the store's time: within a stamp's years (1678–2262)
	lastPull                 stamp // the node's clock's
	received, applied, acked int64
	lagMessages              int64
	// lagOldest is kept whole: a broker's time may lie beyond a stamp's
	// years, and lag_seconds measures it against the clock's monotonic
	// reading when it has one.
	lagOldest time.Time
	rare      *treeUnitRare // nil until one of its fields is set
	state     uint8         // index in unitStates
	passive   bool
	lagKnown  bool
}

// treeUnitRare is what a unit that never failed, sought nor refused a
// message does not show. Once set it stays (cleared fields are zeroed):
// a unit that failed once keeps its last error.
type treeUnitRare struct {
	lastError                        string
	lastErrorAt, nextRetryAt         time.Time // UTC; zero: none
	lastSeek                         *SeekStatus
	rejected, deadLettered, restarts int64
}

// unitStates are the states a unit's entry shows; treeUnit.state indexes
// it (0, the zero entry's, is starting).
var unitStates = [...]string{StateStarting, StateAcquiring, StateRunning, StateRetrying, StatePaused, StateStopping, StateStopped}

func newTreeUnit() treeUnit {
	return treeUnit{leaseExpires: noStamp, lastPull: noStamp}
}

func (e *treeUnit) stateName() string { return unitStates[e.state] }

// setState sets one of the unit states (architecture §13); any other
// string is a bug.
func (e *treeUnit) setState(state string) {
	i := slices.Index(unitStates[:], state)
	if i < 0 {
		panic("actors: not a unit state: " + state)
	}
	e.state = uint8(i)
}

// withRare returns the entry's rarely set fields, making them on first use.
func (e *treeUnit) withRare() *treeUnitRare {
	if e.rare == nil {
		e.rare = &treeUnitRare{}
	}
	return e.rare
}

// setLease records the lease the unit holds (token 0, expires zero: none).
func (e *treeUnit) setLease(token int64, expires time.Time) {
	e.leaseToken, e.leaseExpires = token, stampOf(expires)
}

func (e *treeUnit) dropLease() { e.setLease(0, time.Time{}) }

// pulled records a fetch's n messages at t.
func (e *treeUnit) pulled(n int64, t time.Time) {
	e.received += n
	e.lastPull = stampOf(t)
}

// setLag records the unit's lag (lag, and what lag_seconds is made of).
func (e *treeUnit) setLag(l Lag) {
	e.lagMessages, e.lagOldest, e.lagKnown = l.Messages, l.Oldest, l.Known
}

func (e *treeUnit) lag() Lag {
	return Lag{Messages: e.lagMessages, Oldest: e.lagOldest, Known: e.lagKnown}
}

// appliedBatch counts an applied batch's applied, rejected and
// dead-lettered messages.
func (e *treeUnit) appliedBatch(applied, rejected, dead int64) {
	e.applied += applied
	if rejected != 0 || dead != 0 {
		m := e.withRare()
		m.rejected += rejected
		m.deadLettered += dead
	}
}

func (e *treeUnit) restarted() { e.withRare().restarts++ }

// setError records msg as the unit's last error at t ("" clears it).
func (e *treeUnit) setError(msg string, t time.Time) {
	if msg == "" {
		if e.rare != nil {
			e.rare.lastError, e.rare.lastErrorAt = "", time.Time{}
		}
		return
	}
	m := e.withRare()
	m.lastError, m.lastErrorAt = msg, t.UTC()
}

// setNextRetry records when the unit retries (zero: it does not).
func (e *treeUnit) setNextRetry(t time.Time) {
	if t.IsZero() && e.rare == nil {
		return
	}
	e.withRare().nextRetryAt = t.UTC()
}

// setLastSeek records the last seek carried out (replaced whole).
func (e *treeUnit) setLastSeek(s *SeekStatus) {
	if s == nil && e.rare == nil {
		return
	}
	e.withRare().lastSeek = s
}

// status is the entry as the tree shows it: unit's, on node, its
// lag_seconds at now, its times from times.
func (e *treeUnit) status(unit, node string, now time.Time, times *treeTimes) UnitStatus {
	s := UnitStatus{
		Unit: unit, Node: node, State: e.stateName(), LeaseToken: e.leaseToken,
		LeaseExpiresAt: times.at(e.leaseExpires.time()), Position: e.position, Lag: e.lagMessages,
		Received: e.received, Applied: e.applied, Acked: e.acked, LastPullAt: times.at(e.lastPull.time()),
		LagSeconds: e.lag().Seconds(now), Passive: e.passive,
	}
	if m := e.rare; m != nil {
		s.Rejected, s.DeadLettered, s.Restarts = m.rejected, m.deadLettered, m.restarts
		s.LastError, s.LastErrorAt, s.NextRetryAt = m.lastError, times.at(m.lastErrorAt), times.at(m.nextRetryAt)
		s.LastSeek = m.lastSeek
	}
	return s
}

// treeTimes hands out a snapshot's *time.Time fields from shared arrays:
// an allocation per treeTimesChunk times, not one per time.
type treeTimes []time.Time

const treeTimesChunk = 64

// at points at t in UTC, nil for the zero time.
func (p *treeTimes) at(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	if len(*p) == cap(*p) {
		*p = make([]time.Time, 0, treeTimesChunk)
	}
	*p = append(*p, t.UTC())
	return &(*p)[len(*p)-1]
}
