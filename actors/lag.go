package actors

import (
	"math"
	"time"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/internal/mutate"
)

// ---- lag in clear units ----
//
// A unit's lag has two figures, as the tree (lag, lag_seconds) and the
// metrics (drover_unit_lag_messages, drover_unit_lag_seconds) show them:
//
//   - messages: how many messages the broker holds for the unit beyond
//     what it fetched, as of its last fetch (brokers.Result.Lag); -1 when
//     the broker cannot count them.
//   - seconds: the age of the oldest message the unit has not applied yet,
//     measured against the node's clock (Env.Clock) when the tree or the
//     metrics are read, so that a unit that is stuck shows it growing. 0
//     when the unit has applied everything the broker holds for it; -1
//     when the broker cannot say how old its oldest waiting message is.
//
// "Not applied" is the fetch in hand (its oldest message: a stream's
// first, a queue receive's earliest stamped) and, after it
// is applied, what the broker still holds (brokers.Result.Oldest). A
// stream whose adapter cannot name the time of the next message waiting
// has it taken as the time of the last message fetched: that message is
// no newer than the next, so lag_seconds errs on the high side, by at most
// the gap between two messages. A queue unit is one slot: its figure is
// the messages it holds and those waiting for any slot; messages in other
// slots' hands are theirs.

// Lag is a unit's lag as the tree and the metrics show it.
type Lag struct {
	// Messages is the broker's count of messages beyond the unit's last
	// fetch, -1 when unknown.
	Messages int64
	// Oldest is the broker's time of the oldest message the unit has not
	// applied; zero, when Known, means none: the unit is caught up.
	Oldest time.Time
	// Known says the broker told (or the unit saw) Oldest.
	Known bool
}

// unknownLag is the lag of a unit that has not fetched yet.
var unknownLag = Lag{Messages: -1}

// Seconds is lag_seconds at now: -1 when unknown, 0 when caught up, else
// now - Oldest in seconds (millisecond precision), never negative (a
// broker's clock ahead of the node's).
func (l Lag) Seconds(now time.Time) float64 {
	switch {
	case !l.Known:
		return -1
	case l.Oldest.IsZero():
		return 0
	}
	d := now.Sub(l.Oldest)
	if d <= 0 {
		return 0
	}
	return math.Round(d.Seconds()*1000) / 1000
}

// lagTrack is what a unit knows of its lag between a fetch and the apply
// of that fetch.
type lagTrack struct {
	after Lag // the lag once the fetch in hand is applied
}

// fetched takes a fetch's result and returns the unit's lag while its
// messages are not applied; applied() is the lag once they are. It reads
// the messages' times only (no allocation; a stream's first and last).
func (t *lagTrack) fetched(r brokers.Result, stream bool) Lag {
	after := Lag{Messages: r.Lag}
	first, last, timed := fetchTimes(r.Messages, stream)
	switch {
	case (r.Lag == 0 || r.End) && !mutate.On(mutate.CaughtUpUnknown):
		after.Known = true // nothing left in the broker
	case !r.Oldest.IsZero():
		after.Oldest, after.Known = r.Oldest, true
	case r.Lag < 0 || !stream:
		// unknown: the broker neither counts nor dates what is left
	case !last.IsZero():
		// the next message is no older than the last one fetched
		after.Oldest, after.Known = last, true
	case len(r.Messages) == 0 && t.after.Known && !t.after.Oldest.IsZero():
		after.Oldest, after.Known = t.after.Oldest, true // nothing new learnt
	}
	t.after = after
	if len(r.Messages) == 0 {
		return after
	}
	now := after
	now.Known = timed && !first.IsZero() && (stream || after.Known)
	now.Oldest = first
	if now.Known && !after.Oldest.IsZero() && after.Oldest.Before(first) {
		now.Oldest = after.Oldest // a queue's waiting message older than those in hand
	}
	if !now.Known {
		now.Oldest = time.Time{}
	}
	return now
}

// fetchTimes returns the oldest and the newest time of a fetch's messages
// and whether they carry times. A stream's are its first and last message
// (the oldest unapplied message of a stream is the first in its order):
// two reads, whatever the batch size. A queue's, in delivery order, are
// looked for among all of them (a receive holds a few: 10 on SQS).
func fetchTimes(msgs []brokers.Message, stream bool) (first, last time.Time, timed bool) {
	if len(msgs) == 0 {
		return first, last, true
	}
	if stream {
		first, last = msgs[0].Time, msgs[len(msgs)-1].Time
		return first, last, !first.IsZero() && !last.IsZero()
	}
	timed = true
	for i := range msgs {
		m := msgs[i].Time
		if m.IsZero() {
			timed = false
			continue
		}
		if first.IsZero() || m.Before(first) {
			first = m
		}
		if m.After(last) {
			last = m
		}
	}
	return first, last, timed
}

// applied is the lag once the fetch last passed to fetched is applied.
func (t *lagTrack) applied() Lag { return t.after }

// same reports whether two lags show alike.
func (l Lag) same(o Lag) bool {
	return l.Messages == o.Messages && l.Known == o.Known && l.Oldest.Equal(o.Oldest)
}

// showLag records l in the tree and the metrics unless it is was, the
// lag they show.
func (u *unitActor) showLag(was, l Lag) {
	if l.same(was) {
		return
	}
	u.status(func(s *treeUnit) { s.setLag(l) })
	u.node.metrics.Lag(u.spec.Name, u.id, l)
}
