package persistence

import (
	"reflect"
	"slices"
	"testing"
	"time"
)

// TestAnswerOfAndRenewed: a full answer told as a RenewAnswer keeps only
// what differs from the leases given (a changed expiry or acquisition,
// the lost, the skipped), and Renewed gives the full answer back.
func TestAnswerOfAndRenewed(t *testing.T) {
	t0 := time.Unix(1_000_000, 0).UTC()
	beat := t0.Add(time.Second)
	l := func(unit string, token int64, exp time.Time) Lease {
		return Lease{Unit: unit, Owner: "n1", Token: token, ExpiresAt: exp, AcquiredAt: t0}
	}
	ls := []Lease{l("a", 1, t0.Add(time.Minute)), l("b", 2, t0.Add(time.Minute)), l("c", 3, t0.Add(time.Minute)),
		l("d", 4, t0.Add(time.Minute)), l("e", 5, t0.Add(time.Minute))}
	withBeat := func(x Lease) Lease { x.RenewedAt = beat; return x }
	extended := withBeat(l("b", 2, t0.Add(time.Hour)))
	reacquired := withBeat(ls[4])
	reacquired.AcquiredAt = t0.Add(-time.Hour)
	renewed := []Lease{withBeat(ls[0]), extended, reacquired} // c lost, d skipped
	lost := []string{"c"}

	a := AnswerOf(ls, renewed, lost)
	want := RenewAnswer{Changed: []Lease{extended, reacquired}, Lost: []string{"c"}, Skipped: []string{"d"}, Beat: beat}
	if !reflect.DeepEqual(a, want) {
		t.Fatalf("AnswerOf = %+v\nwant %+v", a, want)
	}
	if got := a.Renewed("n1", ls); !reflect.DeepEqual(got, renewed) {
		t.Fatalf("Renewed = %+v\nwant %+v", got, renewed)
	}
	// nothing changed: an empty answer but for the beat
	quiet := AnswerOf(ls[:1], renewed[:1], nil)
	if len(quiet.Changed)+len(quiet.Lost)+len(quiet.Skipped) != 0 || !quiet.Beat.Equal(beat) {
		t.Fatalf("quiet answer %+v", quiet)
	}
	if got := quiet.Renewed("n1", ls[:1]); !slices.EqualFunc(got, renewed[:1], func(x, y Lease) bool { return reflect.DeepEqual(x, y) }) {
		t.Fatalf("quiet Renewed = %+v", got)
	}
}
