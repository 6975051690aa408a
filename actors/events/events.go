// Package events is a node's bounded log of why its units are where they
// are (architecture §10, events): placement decisions, lease
// acquisitions, takeovers, losses and releases, restarts, position
// resets and operators' controls (not passivation: idle units passivate
// and wake too often, and would push the decisions out). The runtime records into a Log from
// its actors' goroutines; the debug endpoint reads it from HTTP handlers.
//
// A Log is a ring of at most its capacity entries: the oldest is
// overwritten once it is full, so its memory is bounded by the count
// whatever runs. Record takes a mutex and copies one Event; it starts no
// goroutine and is never called per message, only per unit decision.
// A nil *Log records nothing and reads empty.
package events

import (
	"sort"
	"sync"
	"time"

	"github.com/drover-dev/drover/internal/clock"
	"github.com/drover-dev/drover/internal/redact"
)

// Kinds of events. Callers outside the runtime (controls) record
// KindControl with their action in Action.
const (
	// KindAssigned: placement gave this node the unit (Members is the
	// size of the view it decided on).
	KindAssigned = "assigned"
	// KindGivenUp: placement no longer gives this node the unit; it
	// hands it over.
	KindGivenUp = "given_up"
	// KindAcquired: the unit took its lease, free or released (PrevOwner
	// empty, or this node's own earlier token).
	KindAcquired = "acquired"
	// KindTakeover: the unit took its lease from another holder
	// (PrevOwner, PrevToken) that was absent from the view and had
	// stopped renewing, or whose lease had expired.
	KindTakeover = "takeover"
	// KindLeaseLost: the store no longer has the unit's lease with Token;
	// Reason says where it was found lost.
	KindLeaseLost = "lease_lost"
	// KindReleased: the unit gave its lease back (handover, stop).
	KindReleased = "released"
	// KindRestart: the unit failed to its supervisor, which restarts it
	// (Reason is the error, as last_error shows it).
	KindRestart = "restart"
	// KindPositionReset: the checkpoint was no longer a position of the
	// broker and was reset under on_position_reset (Reason: from, to, why).
	KindPositionReset = "position_reset"
	// KindControl: an operator's control (pause, resume, seek, drain,
	// reload, ...), Action naming it and By who asked, where known.
	KindControl = "control"
)

// DefaultCapacity is the number of events a node keeps by default.
const DefaultCapacity = 10000

// maxReason bounds the text of one event's Reason, in bytes.
const maxReason = 1024

// Event is one entry. Zero fields are left out of the JSON.
type Event struct {
	// Seq numbers the events of one node's log from 1, in the order
	// recorded; with Node it identifies an event.
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
	Node string    `json:"node"`
	// Source and Unit (source/partition) the event is about; a control of
	// a whole source or node has no Unit.
	Source string `json:"source,omitempty"`
	Unit   string `json:"unit,omitempty"`
	Kind   string `json:"kind"`
	// PrevOwner and PrevToken are the holder a lease was taken from and
	// its token (takeover, acquired); Token is the lease token the event
	// is about (the new one for acquired and takeover).
	PrevOwner string `json:"prev_owner,omitempty"`
	PrevToken int64  `json:"prev_token,omitempty"`
	Token     int64  `json:"token,omitempty"`
	// Members is the size of the membership view a placement decision was
	// made on.
	Members int `json:"members,omitempty"`
	// Action and By describe a control.
	Action string `json:"action,omitempty"`
	By     string `json:"by,omitempty"`
	// Reason is why: the error of a restart or a loss, the cause of a
	// reset, a control's note. Secrets in URLs are masked.
	Reason string `json:"reason,omitempty"`
}

// Log is a node's ring of events, safe for concurrent use.
type Log struct {
	node  string
	clock clock.Clock

	mu   sync.Mutex
	buf  []entry // grows to cap, then wraps
	next int     // where the next event goes once buf is full
	seq  uint64  // the last event's; the ring holds the len(buf) up to it
	cap  int
}

// New returns the log of node, timed by clk (nil: the wall clock), keeping
// the last capacity events (0 or less: DefaultCapacity).
func New(node string, clk clock.Clock, capacity int) *Log {
	if clk == nil {
		clk = clock.Real{}
	}
	if capacity <= 0 {
		capacity = DefaultCapacity
	}
	return &Log{node: node, clock: clk, cap: capacity}
}

// Node is the name the log stamps on its events.
func (l *Log) Node() string {
	if l == nil {
		return ""
	}
	return l.node
}

// Record appends e, stamping its Seq, its Node (when empty) and its Time
// (when zero, the log's clock), and masking secrets in its Reason. Its
// Time comes back without a monotonic clock reading, as its JSON does:
// the node's events compare by the wall clock, like other nodes'. It
// never blocks on anything but the log's mutex.
func (l *Log) Record(e Event) {
	if l == nil {
		return
	}
	if e.Node == "" {
		e.Node = l.node
	}
	if e.Time.IsZero() {
		e.Time = l.clock.Now()
	}
	e.Time = e.Time.Round(0) // the ring keeps no monotonic reading
	if e.Reason != "" {
		e.Reason = clean(e.Reason)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	if len(l.buf) < l.cap {
		if len(l.buf) == cap(l.buf) {
			// grow by doubling but never past the capacity: append's
			// growth would leave up to a quarter of the ring unused for
			// good (2.1 MB instead of 1.8 at the default capacity)
			buf := make([]entry, len(l.buf), min(max(2*cap(l.buf), 16), l.cap))
			copy(buf, l.buf)
			l.buf = buf
		}
		l.buf = append(l.buf, entryOf(e, l.node))
		return
	}
	l.buf[l.next] = entryOf(e, l.node)
	l.next = (l.next + 1) % l.cap
}

// clean masks secrets of URLs in a reason and bounds its length.
func clean(s string) string {
	s = redact.URL(s)
	if len(s) > maxReason {
		cut := maxReason
		for cut > 0 && s[cut]&0xC0 == 0x80 { // not inside a UTF-8 sequence
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// Filter selects events. Zero fields select everything.
type Filter struct {
	Unit   string    // exactly this unit
	Source string    // exactly this source
	Since  time.Time // at or after
	// Limit keeps the last Limit events that match (0: all).
	Limit int
}

// Match reports whether e passes f (Limit aside).
func (f Filter) Match(e Event) bool {
	return (f.Unit == "" || e.Unit == f.Unit) &&
		(f.Source == "" || e.Source == f.Source) &&
		(f.Since.IsZero() || !e.Time.Before(f.Since))
}

// Query returns the events that match f, oldest first; the caller owns
// the slice. It never returns nil.
func (l *Log) Query(f Filter) []Event {
	out := []Event{}
	if l == nil {
		return out
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(l.buf)
	first := l.seq - uint64(n) + 1 // Record numbers every event it keeps
	for i := range n {
		e := l.buf[(l.next+i)%n].event(l.node, first+uint64(i))
		if f.Match(e) {
			out = append(out, e)
		}
	}
	return limit(out, f.Limit)
}

func limit(es []Event, n int) []Event {
	if n > 0 && len(es) > n {
		return es[len(es)-n:]
	}
	return es
}

// Merge merges the events of several nodes into one list in time order
// (ties by node, then Seq), each event once (by Node and Seq), keeping
// the last limit (0: all). It never returns nil.
func Merge(limitN int, lists ...[]Event) []Event {
	type key struct {
		node string
		seq  uint64
	}
	seen := map[key]bool{}
	out := []Event{}
	for _, es := range lists {
		for _, e := range es {
			k := key{e.Node, e.Seq}
			if seen[k] {
				continue
			}
			seen[k] = true
			out = append(out, e)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return Less(out[i], out[j]) })
	return limit(out, limitN)
}

// Less is the order of merged events: by time, then node, then Seq.
func Less(a, b Event) bool {
	if !a.Time.Equal(b.Time) {
		return a.Time.Before(b.Time)
	}
	if a.Node != b.Node {
		return a.Node < b.Node
	}
	return a.Seq < b.Seq
}
