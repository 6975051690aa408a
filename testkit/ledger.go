package testkit

// The ledger: what was produced, what the store committed, and the
// messages a fault excuses from being applied.

import (
	"fmt"
	"time"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/persistence"
)

// ledger is what the invariant checks compare: what was produced and what
// the store committed.
type ledger struct {
	produced  map[string]produced // key -> message
	unapplied int                 // produced messages not committed yet
	applied   map[string]int      // key -> commits that applied it
	lastPos   map[string]string   // unit -> last applied position (streams)
	tokens    map[string]string   // unit#token -> owner that acquired it
	appliers  map[string]string   // unit#token -> owner that applied with it
	// takeovers are the leases the store gave from one holder to another
	// (unit#token), until a batch commits with that token: the new owner
	// must have logged the takeover by then (checkTakeoverLogged).
	takeovers    map[string]persistence.Lease
	kills        []kill
	failovers    []Failover
	violations   []Violation
	totalApplied int64

	// gen counts the recreations of each source's stream or queue: a
	// message's key carries the generation it was produced in.
	gen map[string]int
	// unitGen is the generation a unit's commits count in; recreated holds
	// the units of a recreated stream until they reset (or the quiet time
	// after the recreation is over).
	unitGen   map[string]int
	recreated map[string]time.Time
	// queueGen: source -> message id -> generation that produced it.
	queueGen map[string]map[string]int
	// lastPublished is the newest position produced per stream unit.
	lastPublished map[string]string
	// initial are the stream units that existed when the cluster started;
	// latest are the sources that start at latest. For their initial units
	// the messages produced before the unit's start was resolved are not
	// expected.
	initial  map[string]bool
	latest   map[string]bool
	acquired map[string]bool // units acquired at least once
	// resets counts checkpoint resets (Batch.Reset) per unit; allowReset
	// those the testkit made legitimate besides the first (a resolution).
	resets     map[string]int
	allowReset map[string]int
	resetsAt   map[string]int  // resets of the unit when its stream was last recreated
	aborted    map[string]bool // keys of messages of aborted transactions
	// leaseChanges counts acquisitions per unit during the partition in
	// force, partEvents the node events meanwhile (both reset when the
	// partitions heal: checkChurn).
	leaseChanges map[string]int
	partEvents   int
	maxChanges   int
	// seeks are the seeks asked and not answered (seek.go); reapply counts
	// the applications a seek back allowed a message beyond its first,
	// skipped the messages a seek forward skipped on purpose.
	seeks   []*seekMark
	reapply map[string]int
	skipped map[string]bool
	// seekAsked is when each seek asked through a control row was asked
	// (the row's seek_requested_at), by "unit#id": its reset must commit
	// within the seek expiry (seek.go, checkSeekExpiry).
	seekAsked map[string]time.Time
	// subSeek: unit -> the checkpoint a seek asked to a sub-position its
	// record does not have writes; subArmed: unit -> that checkpoint, once
	// written, until on_position_reset's reset (simkplseek.go).
	subSeek, subArmed map[string]string
}

type produced struct {
	source, unit, position string
	gen                    int
}

type kill struct {
	node  string
	at    time.Time
	units map[string]bool // units whose lease it held
	clean bool
	// orphaned: units whose lease row a vanished transaction of the killed
	// node holds locked until then (LockUnit)
	orphaned map[string]time.Time
}

// Failover is how long one unit of a killed node waited for a new owner.
type Failover struct {
	Unit     string
	From     string
	To       string
	KilledAt time.Time
	Took     time.Duration
	// Clean is false when other faults were active at the time, so the
	// failover bound does not apply.
	Clean bool
	// Orphaned is how long a vanished transaction held the unit's lease row
	// locked after the kill: the bound starts after it.
	Orphaned time.Duration
}

// Violation is a broken invariant.
type Violation struct {
	Invariant string // lost, duplicated, order, fencing, failover, ...
	Detail    string
}

func (v Violation) String() string { return v.Invariant + ": " + v.Detail }

func newLedger() *ledger {
	return &ledger{
		produced: map[string]produced{}, applied: map[string]int{}, lastPos: map[string]string{},
		tokens: map[string]string{}, appliers: map[string]string{}, takeovers: map[string]persistence.Lease{},
		gen: map[string]int{}, unitGen: map[string]int{}, recreated: map[string]time.Time{},
		queueGen: map[string]map[string]int{}, lastPublished: map[string]string{},
		initial: map[string]bool{}, latest: map[string]bool{}, acquired: map[string]bool{},
		resets: map[string]int{}, allowReset: map[string]int{}, resetsAt: map[string]int{}, aborted: map[string]bool{},
		leaseChanges: map[string]int{}, reapply: map[string]int{}, skipped: map[string]bool{},
		seekAsked: map[string]time.Time{}, subSeek: map[string]string{}, subArmed: map[string]string{},
	}
}

func streamKey(unit string, gen int, pos string) string {
	if gen == 0 {
		return unit + "@" + pos
	}
	return fmt.Sprintf("%s@g%d:%s", unit, gen, pos)
}

func queueKey(source string, gen int, id string) string {
	if gen == 0 {
		return source + "#" + id
	}
	return fmt.Sprintf("%s#g%d:%s", source, gen, id)
}

func tokenKey(unit string, tok int64) string { return fmt.Sprintf("%s#%d", unit, tok) }

// expect records a published message.
func (l *ledger) expect(key string, p produced) {
	if _, ok := l.produced[key]; ok {
		return
	}
	l.produced[key] = p
	if l.applied[key] == 0 {
		l.unapplied++
	}
}

// newUnit records a unit made now (a split, an added partition): its
// commits count in its stream's current generation. Its id may have been
// used before a recreation; a checkpoint of that may still be reset.
func (l *ledger) newUnit(unit string) {
	l.unitGen[unit] = l.gen[sourceOf(unit)]
	delete(l.recreated, unit)
	delete(l.lastPos, unit)
}

// excuse stops expecting a message (the broker lost it, or it was never
// meant to be read).
func (l *ledger) excuse(key string) {
	if _, ok := l.produced[key]; !ok {
		return
	}
	if l.applied[key] == 0 {
		l.unapplied--
	}
	delete(l.produced, key)
}

// excuseUnit stops expecting the unapplied messages of a stream unit of
// generation gen.
func (l *ledger) excuseUnit(unit string, gen int) {
	for k, p := range l.produced {
		if p.unit == unit && p.gen == gen && l.applied[k] == 0 {
			l.excuse(k)
		}
	}
}

// excuseQueue stops expecting the unapplied messages of a queue source of
// generation gen.
func (l *ledger) excuseQueue(source string, gen int) {
	for k, p := range l.produced {
		if p.unit == "" && p.source == source && p.gen == gen && l.applied[k] == 0 {
			l.excuse(k)
		}
	}
}

// excuseBefore stops expecting the messages of a unit's first generation
// at or before pos: produced before its latest start was resolved.
func (l *ledger) excuseBefore(unit, pos string) {
	if pos == "" {
		return
	}
	for k, p := range l.produced {
		if p.unit == unit && p.gen == 0 && brokers.ComparePositions(p.position, pos) <= 0 {
			l.excuse(k)
		}
	}
}
