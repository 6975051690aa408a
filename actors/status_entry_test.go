package actors

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
	"unsafe"
)

// A unit's tree entry is kept in 120 bytes (UnitStatus held whole took
// 248, and 24 more per time set): there is one per unit, idle or not.
func TestUnitEntryIsSmall(t *testing.T) {
	if n := unsafe.Sizeof(unitEntry{}); n > 120 {
		t.Errorf("a unit's tree entry takes %d bytes, want at most 120", n)
	}
}

// Renewing a lease, and the write of a fetch, change an existing entry
// in place: no allocation (a *time.Time each, before).
func TestEntryTimesAllocateNothing(t *testing.T) {
	r := newRegistry("n1")
	r.addSource("s", "memory")
	gen := r.addUnit("s", "s/0")
	r.unit("s", "s/0", gen, func(e *treeUnit) { e.setLease(7, time.Unix(100, 0)) })
	exp := time.Unix(200, 0)
	if n := testing.AllocsPerRun(100, func() { r.leaseRenewed("s", "s/0", 7, exp) }); n != 0 {
		t.Errorf("a lease renewal costs %v allocations, want 0", n)
	}
	lag := Lag{Messages: 3, Oldest: exp, Known: true}
	if n := testing.AllocsPerRun(100, func() {
		r.unit("s", "s/0", gen, func(e *treeUnit) { e.pulled(1, exp); e.setLag(lag); e.setNextRetry(time.Time{}) })
	}); n != 0 {
		t.Errorf("a fetch's write costs %v allocations, want 0", n)
	}
	if got := r.snapshot()[0].Units[0]; got.LeaseExpiresAt == nil || *got.LeaseExpiresAt != exp.UTC() {
		t.Errorf("the renewal shows %v, want %v", got.LeaseExpiresAt, exp.UTC())
	}
}

// A new entry shows what it showed when the registry kept UnitStatus
// itself: the tree JSON is a Contract.
func TestNewEntryJSON(t *testing.T) {
	r := newRegistry("n1")
	r.addSource("s", "memory")
	r.addUnit("s", "s/0")
	b, err := json.Marshal(r.snapshot()[0].Units[0])
	if err != nil {
		t.Fatal(err)
	}
	want := `{"unit":"s/0","node":"n1","state":"starting","lease_token":0,"lease_expires_at":null,"position":"",` +
		`"lag":0,"received":0,"applied":0,"acked":0,"rejected":0,"dead_lettered":0,"restarts":0,"last_pull_at":null,` +
		`"last_error":"","last_error_at":null,"next_retry_at":null,"lag_seconds":-1}`
	if string(b) != want {
		t.Errorf("a new entry shows\n%s\nwant\n%s", b, want)
	}
}

// Every field of UnitStatus shows what was written, times exactly (in
// UTC, as they always were: any location, nanoseconds, the Unix epoch, a
// monotonic reading dropped), and a time cleared shows null again.
func TestEntryShowsEveryFieldWritten(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	r := newRegistry("n1")
	r.now = func() time.Time { return now }
	r.addSource("s", "memory")
	gen := r.addUnit("s", "s/0")
	expires := time.Date(2026, 3, 1, 14, 0, 5, 123456789, time.FixedZone("x", 2*3600))
	pulled := time.Unix(0, 0)
	failed := time.Now() // carries a monotonic reading
	retry := now.Add(time.Second + 1)
	seek := &SeekStatus{To: "earliest", From: "1", Position: "0", At: now, Token: 7}
	r.unit("s", "s/0", gen, func(e *treeUnit) {
		e.setState(StatePaused)
		e.setLease(7, expires)
		e.position = "41"
		e.setLag(Lag{Messages: 12, Oldest: now.Add(-1500 * time.Millisecond), Known: true})
		e.pulled(5, pulled)
		e.appliedBatch(4, 2, 1)
		e.acked = 3
		e.restarted()
		e.restarted()
		e.setError("boom", failed)
		e.setNextRetry(retry)
		e.passive = true
		e.setLastSeek(seek)
	})
	utc := func(t time.Time) *time.Time { t = t.UTC(); return &t }
	want := UnitStatus{
		Unit: "s/0", Node: "n1", State: StatePaused, LeaseToken: 7, LeaseExpiresAt: utc(expires), Position: "41",
		Lag: 12, Received: 5, Applied: 4, Acked: 3, Rejected: 2, DeadLettered: 1, Restarts: 2,
		LastPullAt: utc(pulled), LastError: "boom", LastErrorAt: utc(failed), NextRetryAt: utc(retry),
		LagSeconds: 1.5, Passive: true, LastSeek: seek,
	}
	got := r.snapshot()[0].Units[0]
	v := reflect.ValueOf(want)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Fatalf("the test sets no %s: every field of UnitStatus must be written here", v.Type().Field(i).Name)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("the entry shows\n%+v\nwant\n%+v", got, want)
	}
	for _, p := range [][2]*time.Time{{got.LeaseExpiresAt, want.LeaseExpiresAt}, {got.LastPullAt, want.LastPullAt},
		{got.LastErrorAt, want.LastErrorAt}, {got.NextRetryAt, want.NextRetryAt}} {
		if *p[0] != *p[1] { // the same time.Time, not only the same instant
			t.Errorf("a time shows %#v, want %#v", *p[0], *p[1])
		}
	}

	r.unit("s", "s/0", gen, func(e *treeUnit) {
		e.dropLease()
		e.setError("", time.Time{})
		e.setNextRetry(time.Time{})
		e.setLastSeek(nil)
	})
	got = r.snapshot()[0].Units[0]
	want.LeaseToken, want.LeaseExpiresAt, want.LastError, want.LastErrorAt, want.NextRetryAt, want.LastSeek = 0, nil, "", nil, nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("cleared, the entry shows\n%+v\nwant\n%+v", got, want)
	}
}
