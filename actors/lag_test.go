package actors

import (
	"testing"
	"time"

	"github.com/drover-dev/drover/brokers"
)

func TestLagSeconds(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		lag  Lag
		want float64
	}{
		{unknownLag, -1},
		{Lag{Messages: 0, Known: true}, 0},
		{Lag{Messages: 5, Oldest: now.Add(-2500 * time.Millisecond), Known: true}, 2.5},
		{Lag{Messages: 5, Oldest: now.Add(time.Second), Known: true}, 0}, // a broker clock ahead
		{Lag{Messages: 5, Oldest: now.Add(-time.Hour)}, -1},              // not known
	} {
		if got := c.lag.Seconds(now); got != c.want {
			t.Errorf("%+v: %v, want %v", c.lag, got, c.want)
		}
	}
}

// The lag while a fetch is in hand, and once it is applied, for each kind
// of broker answer.
func TestLagTrack(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	msgs := func(ts ...int) []brokers.Message {
		out := make([]brokers.Message, len(ts))
		for i, s := range ts {
			if s >= 0 {
				out[i].Time = at(s)
			}
		}
		return out
	}
	known := func(m int64, s int) Lag { return Lag{Messages: m, Oldest: at(s), Known: true} }
	caught := func() Lag { return Lag{Messages: 0, Known: true} }
	for _, c := range []struct {
		name            string
		stream          bool
		before          Lag // the track's lag applied before this fetch
		res             brokers.Result
		inHand, applied Lag
	}{
		{name: "stream caught up", stream: true, res: brokers.Result{Messages: msgs(3, 4), Lag: 0},
			inHand: known(0, 3), applied: caught()},
		{name: "stream idle", stream: true, res: brokers.Result{Lag: 0}, inHand: caught(), applied: caught()},
		{name: "stream behind, next dated", stream: true, res: brokers.Result{Messages: msgs(3, 4), Lag: 9, Oldest: at(5)},
			inHand: known(9, 3), applied: known(9, 5)},
		{name: "stream behind, next not dated: the last fetched", stream: true, res: brokers.Result{Messages: msgs(3, 4), Lag: 9},
			inHand: known(9, 3), applied: known(9, 4)},
		{name: "stream behind, empty fetch keeps what it knew", stream: true, before: known(9, 4), res: brokers.Result{Lag: 9},
			inHand: known(9, 4), applied: known(9, 4)},
		{name: "stream count unknown, dated (kinesis)", stream: true, res: brokers.Result{Messages: msgs(3), Lag: -1, Oldest: at(7)},
			inHand: known(-1, 3), applied: known(-1, 7)},
		{name: "stream count unknown, not dated", stream: true, res: brokers.Result{Messages: msgs(3), Lag: -1},
			inHand: known(-1, 3), applied: Lag{Messages: -1}},
		{name: "stream end", stream: true, res: brokers.Result{Messages: msgs(3), Lag: -1, End: true},
			inHand: known(-1, 3), applied: Lag{Messages: -1, Known: true}},
		{name: "stream messages without time", stream: true, res: brokers.Result{Messages: msgs(-1, 4), Lag: 0},
			inHand: Lag{Messages: 0}, applied: caught()},
		{name: "stream: the first in order is the oldest", stream: true, res: brokers.Result{Messages: msgs(5, 3, 6), Lag: 0},
			inHand: known(0, 5), applied: caught()},
		{name: "queue: the oldest by time", res: brokers.Result{Messages: msgs(5, 3, 6), Lag: 0},
			inHand: known(0, 3), applied: caught()},
		{name: "queue messages without time", res: brokers.Result{Messages: msgs(5, -1), Lag: 0},
			inHand: Lag{Messages: 0}, applied: caught()},
		{name: "queue unknown (sqs, pubsub)", res: brokers.Result{Messages: msgs(3), Lag: -1},
			inHand: Lag{Messages: -1}, applied: Lag{Messages: -1}},
		{name: "queue waiting message older than those in hand", res: brokers.Result{Messages: msgs(6, 4), Lag: 2, Oldest: at(2)},
			inHand: known(2, 2), applied: known(2, 2)},
		{name: "queue count but no date", res: brokers.Result{Messages: msgs(6, 4), Lag: 2},
			inHand: Lag{Messages: 2}, applied: Lag{Messages: 2}},
		{name: "queue drained", res: brokers.Result{Messages: msgs(6, 4), Lag: 0},
			inHand: known(0, 4), applied: caught()},
	} {
		tr := lagTrack{after: c.before}
		if got := tr.fetched(c.res, c.stream); !got.same(c.inHand) {
			t.Errorf("%s: in hand %+v, want %+v", c.name, got, c.inHand)
		}
		if got := tr.applied(); !got.same(c.applied) {
			t.Errorf("%s: applied %+v, want %+v", c.name, got, c.applied)
		}
	}
}

// The unit's lag costs one pass over a fetch's message times, no
// allocation: go test -run '^$' -bench LagTrack ./actors
func BenchmarkLagTrackFetched(b *testing.B) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	msgs := make([]brokers.Message, 500)
	for i := range msgs {
		msgs[i].Time = t0.Add(time.Duration(i) * time.Millisecond)
	}
	r := brokers.Result{Messages: msgs, Lag: 1000}
	var tr lagTrack
	b.ReportAllocs()
	for b.Loop() {
		_ = tr.fetched(r, true)
	}
}
