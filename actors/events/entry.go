package events

import (
	"math"
	"strings"
	"time"
)

// entry is an Event as the ring keeps it, in 56 bytes (it was 144; an
// Event is 184): a full ring of 10,000 idle units' acquisitions and
// releases is 560 KB, with nothing more on the heap (issue 12 item 5).
// It holds what those kinds set; what the others set is in rare, and
// what an entry cannot hold exactly keeps the whole event (rare.whole),
// so that every event reads back as it was recorded:
//   - Seq is not kept: Record numbers the events it keeps one by one, so
//     the ring's position gives it (Query);
//   - Time is Unix nanoseconds and whether it is local (else UTC), the
//     locations the node's clocks give;
//   - Node is the log's own (Record's default; the runtime never names
//     another);
//   - Source is the start of Unit ("<source>/<partition>"): its length;
//   - Kind is one of the package's, by its index in kinds;
//   - PrevOwner is empty or the log's node (acquired: a free lease, or
//     the node's own earlier token) in flags, else in rare (takeover);
//   - Members fits in 32 bits.
type entry struct {
	wall             int64 // Time, Unix nanoseconds
	unit             string
	token, prevToken int64
	rare             *rareFields
	members          int32
	sourceLen        uint16 // Source is unit[:sourceLen]
	kind             uint8  // kinds[kind]
	flags            uint8
}

const (
	local           uint8 = 1 << iota // Time is in time.Local, not UTC
	prevOwnerIsNode                   // PrevOwner is the log's node
)

// rareFields are what takeovers, losses, restarts, resets and controls
// add; whole is an event the entry cannot hold (another node's, a source
// that does not start its unit, another kind or location, a time out of
// int64 nanoseconds), kept as it was recorded.
type rareFields struct {
	prevOwner, action, by, reason string
	whole                         *Event
}

// kinds are the kinds an entry holds as a number.
var kinds = [...]string{"", KindAssigned, KindGivenUp, KindAcquired, KindTakeover, KindLeaseLost,
	KindReleased, KindRestart, KindPositionReset, KindControl}

// entryOf is e (Node and Time stamped, Seq aside) as the log of node
// keeps it.
func entryOf(e Event, node string) entry {
	en := entry{wall: e.Time.UnixNano(), unit: e.Unit, token: e.Token, prevToken: e.PrevToken,
		members: int32(e.Members), sourceLen: uint16(len(e.Source))}
	if e.Time.Location() == time.Local {
		en.flags |= local
	}
	for int(en.kind) < len(kinds) && kinds[en.kind] != e.Kind {
		en.kind++
	}
	// == and not Equal: the same instant in the same location (Record
	// has dropped the monotonic reading)
	fits := e.Node == node && strings.HasPrefix(e.Unit, e.Source) && len(e.Source) <= math.MaxUint16 &&
		int(en.kind) < len(kinds) && int(en.members) == e.Members && en.time() == e.Time
	if !fits {
		whole := e // not e: its address would put every event on the heap
		return entry{rare: &rareFields{whole: &whole}}
	}
	r := rareFields{action: e.Action, by: e.By, reason: e.Reason}
	switch e.PrevOwner {
	case "":
	case node:
		en.flags |= prevOwnerIsNode
	default:
		r.prevOwner = e.PrevOwner
	}
	if r != (rareFields{}) {
		rare := r // allocated only here
		en.rare = &rare
	}
	return en
}

// time is the entry's Time when it holds it.
func (en *entry) time() time.Time {
	t := time.Unix(0, en.wall)
	if en.flags&local == 0 {
		return t.UTC()
	}
	return t
}

// event is en as recorded in the log of node, numbered seq.
func (en *entry) event(node string, seq uint64) Event {
	if r := en.rare; r != nil && r.whole != nil {
		e := *r.whole
		e.Seq = seq
		return e
	}
	e := Event{Seq: seq, Time: en.time(), Node: node, Source: en.unit[:en.sourceLen], Unit: en.unit,
		Kind: kinds[en.kind], PrevToken: en.prevToken, Token: en.token, Members: int(en.members)}
	if r := en.rare; r != nil {
		e.PrevOwner, e.Action, e.By, e.Reason = r.prevOwner, r.action, r.by, r.reason
	}
	if en.flags&prevOwnerIsNode != 0 {
		e.PrevOwner = node
	}
	return e
}
