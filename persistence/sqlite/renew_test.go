package sqlite

import (
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/drover-dev/drover/persistence"
)

// TestRenewQuietRoundFindsARowEditedByHand: a quiet round (lease_changes,
// the owner's row count and the fingerprint as the last round left them)
// checks no lease one by one, but the update of the leases due counts the
// rows it wrote: a due lease whose token was changed behind the store's
// back (by hand, no lease_changes) is reported lost, not renewed.
func TestRenewQuietRoundFindsARowEditedByHand(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "renew.db"), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var ls []persistence.Lease
	for _, u := range []string{"u/0", "u/1", "u/2"} {
		l, err := s.Acquire(ctx, persistence.AcquireRequest{Unit: u, Owner: "node-1", TTL: time.Minute, Live: []string{"node-1"}})
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	// each round's ttl puts every lease within ttl/2 of its expiry: all due
	ttl := 10 * time.Minute
	for range 2 {
		renewed, lost, err := s.RenewLeases(ctx, "node-1", ls, ttl)
		if err != nil || len(lost) != 0 || len(renewed) != len(ls) {
			t.Fatalf("renewed %v, lost %v, err %v; want all renewed", renewed, lost, err)
		}
		ls, ttl = renewed, 4*ttl
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE drover_leases SET token = token + 1 WHERE unit = 'u/1'`); err != nil {
		t.Fatal(err)
	}
	renewed, lost, err := s.RenewLeases(ctx, "node-1", ls, ttl)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(lost, []string{"u/1"}) || len(renewed) != 2 || renewed[0].Unit != "u/0" || renewed[1].Unit != "u/2" {
		t.Fatalf("renewed %v, lost %v; want u/0 and u/2 renewed, u/1 lost", renewed, lost)
	}
	for _, r := range renewed {
		if r.ExpiresAt.Before(time.Now().Add(ttl / 2)) {
			t.Errorf("%s expires at %s, want extended by %s", r.Unit, r.ExpiresAt, ttl)
		}
	}
}

// TestQuietRoundAllocatesNoAnswerPerLease: a quiet round of 2,000 idle
// leases (none due) answers as what changed, nothing, and allocates far
// less than one lease per lease given (a full answer of 2,000 leases is
// 272 KB).
func TestQuietRoundAllocatesNoAnswerPerLease(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "renew.db"), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 2000
	ls := make([]persistence.Lease, n)
	for i := range ls {
		ls[i], err = s.Acquire(ctx, persistence.AcquireRequest{Unit: fmt.Sprintf("u/%d", i), Owner: "node-1", TTL: time.Hour, Live: []string{"node-1"}})
		if err != nil {
			t.Fatal(err)
		}
	}
	// the first round checks every lease; the next ones are quiet
	if _, err := s.RenewLeasesChanges(ctx, "node-1", ls, time.Hour); err != nil {
		t.Fatal(err)
	}
	var a persistence.RenewAnswer
	bytes := allocated(func() {
		if a, err = s.RenewLeasesChanges(ctx, "node-1", ls, time.Hour); err != nil {
			t.Fatal(err)
		}
	})
	if len(a.Changed)+len(a.Lost)+len(a.Skipped) != 0 || a.Beat.IsZero() {
		t.Errorf("quiet round answered %d changed, %d lost, %d skipped, beat %v; want nothing but the beat",
			len(a.Changed), len(a.Lost), len(a.Skipped), a.Beat)
	}
	if limit := uint64(n * 136 / 4); bytes > limit {
		t.Errorf("a quiet round of %d leases allocated %d bytes, want at most %d", n, bytes, limit)
	}
}

// allocated is how many heap bytes f allocates.
func allocated(f func()) uint64 {
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	f()
	runtime.ReadMemStats(&m1)
	return m1.TotalAlloc - m0.TotalAlloc
}
