package storetest

import (
	"errors"
	"slices"
	"time"

	"github.com/drover-dev/drover/persistence"
)

// The renewal round as a heartbeat (issue 12 item 5): RenewLeases writes
// the owner's heartbeat, which renews every lease it holds for the
// takeover test, and rewrites a lease row only when its expiry is less
// than ttl/2 away. Lost detection stays exact whatever was rewritten.

// round is one renewal round of node-1 that must succeed.
func (e *env) round(ls []persistence.Lease, ttl time.Duration) (renewed []persistence.Lease, lost []string) {
	e.t.Helper()
	renewed, lost, err := e.s.RenewLeases(e.ctx, "node-1", ls, ttl)
	if err != nil {
		e.t.Fatalf("renew leases: %v", err)
	}
	return renewed, lost
}

func units(ls []persistence.Lease) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.Unit)
	}
	return out
}

// testHeartbeatStale: a lease whose row is never rewritten is kept by its
// owner's heartbeat; once the heartbeat is Stale old, it is taken over.
func testHeartbeatStale(e *env) {
	stale := e.staleFor()
	l := e.acquire("orders/0", "node-1")
	other := e.acquire("orders/1", "node-1")
	step := stale / 4
	for i := range 8 {
		e.pass(step)
		// The heartbeat alone (a round of another lease, not due): orders/0
		// is in no round at all.
		renewed, lost := e.round([]persistence.Lease{other}, longTTL)
		if len(renewed) != 1 || len(lost) != 0 {
			e.t.Fatalf("round %d: renewed %v, lost %v; want orders/1 renewed", i, renewed, lost)
		}
		other = renewed[0]
		if _, err := e.takeover("orders/0", stale); !errors.Is(err, persistence.ErrLeaseHeld) {
			e.t.Fatalf("takeover %s after the acquire, node-1 sending heartbeats: err = %v, want ErrLeaseHeld",
				time.Duration(i+1)*step, err)
		}
	}
	got := e.leases()["orders/0"]
	if got.Owner != "node-1" || got.Token != l.Token || !got.ExpiresAt.Equal(l.ExpiresAt) {
		e.t.Fatalf("orders/0 = %+v, want node-1's row as acquired %+v (never rewritten)", got, l)
	}
	if e.clk != nil && !got.RenewedAt.After(l.RenewedAt) {
		e.t.Errorf("listed RenewedAt %s not after the acquire's %s: the heartbeat counts", got.RenewedAt, l.RenewedAt)
	}
	// node-1 stops: its heartbeat goes stale and orders/0 is taken over.
	taken := e.waitTakeover("orders/0", stale, "node-1's heartbeat went stale and node-2 took orders/0 over")
	if taken.Owner != "node-2" || taken.Token != l.Token+1 {
		e.t.Errorf("lease = %+v, want node-2 token %d", taken, l.Token+1)
	}
}

// testHeartbeatNotDue: a round extends only the leases whose expiry is
// less than ttl/2 away; the others keep their rows and are renewed all
// the same.
func testHeartbeatNotDue(e *env) {
	far := e.acquireTTL("orders/0", "node-1", 2*time.Minute)
	near := e.acquireTTL("orders/1", "node-1", 30*time.Second)
	e.advance(5 * time.Second)
	at := e.now()
	renewed, lost := e.round([]persistence.Lease{far, near}, time.Minute)
	if len(lost) != 0 || !slices.Equal(units(renewed), []string{"orders/0", "orders/1"}) {
		e.t.Fatalf("renewed %v, lost %v; want both renewed", units(renewed), lost)
	}
	if !renewed[0].ExpiresAt.Equal(far.ExpiresAt) || renewed[0].Token != far.Token {
		e.t.Errorf("orders/0 (expiry 2 min away, ttl 1 min) = %+v, want its expiry kept %s", renewed[0], far.ExpiresAt)
	}
	e.wantTime("orders/1 (expiry 25 s away, ttl 1 min) ExpiresAt", renewed[1].ExpiresAt, at.Add(time.Minute))
	listed := e.leases()
	for _, r := range renewed {
		e.wantTime(r.Unit+" RenewedAt", r.RenewedAt, at)
		if got := listed[r.Unit]; !got.ExpiresAt.Equal(r.ExpiresAt) || !got.RenewedAt.Equal(r.RenewedAt) || !got.AcquiredAt.Equal(r.AcquiredAt) {
			e.t.Errorf("listed %s = %+v, want as renewed %+v", r.Unit, got, r)
		}
	}
}

// testHeartbeatLost: a round finds every lease the owner no longer holds,
// after rounds that found nothing changed (a store may skip checking each
// lease then): taken over by another node, acquired again by the owner
// itself (a new token), released; and when the owner gained a lease in
// the same window as it lost one.
func testHeartbeatLost(e *env) {
	ls := []persistence.Lease{
		e.acquire("orders/0", "node-1"), e.acquire("orders/1", "node-1"),
		e.acquire("orders/2", "node-1"), e.acquire("orders/3", "node-1"),
	}
	quiet := func(what string) {
		e.t.Helper()
		for range 2 {
			e.advance(time.Second)
			renewed, lost := e.round(ls, longTTL)
			if len(lost) != 0 || !slices.Equal(units(renewed), units(ls)) {
				e.t.Fatalf("%s: renewed %v, lost %v; want %v renewed", what, units(renewed), lost, units(ls))
			}
			ls = renewed
		}
	}
	lose := func(what string, unit string) {
		e.t.Helper()
		e.advance(time.Second)
		renewed, lost := e.round(ls, longTTL)
		if !slices.Equal(lost, []string{unit}) {
			e.t.Fatalf("%s: lost %v, want [%s]", what, lost, unit)
		}
		var want []persistence.Lease
		for _, l := range ls {
			if l.Unit != unit {
				want = append(want, l)
			}
		}
		if !slices.Equal(units(renewed), units(want)) {
			e.t.Fatalf("%s: renewed %v, want %v", what, units(renewed), units(want))
		}
		ls = renewed
	}
	quiet("before anything changed")
	if _, err := e.s.Acquire(e.ctx, persistence.AcquireRequest{Unit: "orders/0", Owner: "node-2", TTL: longTTL,
		Live: []string{"node-2"}, Stale: 0}); err != nil {
		e.t.Fatalf("takeover by node-2: %v", err)
	}
	lose("taken over by node-2", "orders/0")
	quiet("after the takeover")
	// node-1 gains a lease and loses one in the same window: as many rows.
	gained := e.acquire("orders/9", "node-1")
	if _, err := e.s.Acquire(e.ctx, persistence.AcquireRequest{Unit: "orders/1", Owner: "node-2", TTL: longTTL,
		Live: []string{"node-2"}, Stale: 0}); err != nil {
		e.t.Fatalf("takeover by node-2: %v", err)
	}
	lose("taken over while node-1 gained orders/9", "orders/1")
	ls = append(ls, gained)
	quiet("after orders/9 joined the round")
	// node-1 acquires orders/2 again: the token it renews is gone.
	again := e.acquire("orders/2", "node-1")
	if again.Token != ls[0].Token+1 {
		e.t.Fatalf("orders/2 again: token %d, want %d", again.Token, ls[0].Token+1)
	}
	lose("acquired again with a new token", "orders/2")
	quiet("after the new token")
	if err := e.s.Release(e.ctx, ls[0]); err != nil {
		e.t.Fatal(err)
	}
	lose("released", "orders/3")
}

// testHeartbeatExpiry: a holder renewing every ttl/3 never lets its
// lease lapse, although most rounds leave its row as it was; a node that
// sees the holder live cannot take it.
func testHeartbeatExpiry(e *env) {
	ttl := 3 * e.staleFor()
	l := e.acquireTTL("orders/0", "node-1", ttl)
	kept := 0
	req := persistence.AcquireRequest{Unit: "orders/0", Owner: "node-2", TTL: ttl, Live: []string{"node-1", "node-2"}}
	for i := range 9 {
		e.pass(ttl / 3)
		renewed, lost := e.round([]persistence.Lease{l}, ttl)
		if len(renewed) != 1 || len(lost) != 0 {
			e.t.Fatalf("round %d: renewed %v, lost %v", i, renewed, lost)
		}
		if renewed[0].ExpiresAt.Equal(l.ExpiresAt) {
			kept++
		}
		l = renewed[0]
		if left := l.ExpiresAt.Sub(e.now()); left < ttl/3 {
			e.t.Fatalf("round %d: the lease expires in %s, want at least ttl/3 = %s after a round", i, left, ttl/3)
		}
		if _, err := e.s.Acquire(e.ctx, req); !errors.Is(err, persistence.ErrLeaseHeld) {
			e.t.Fatalf("round %d: acquire by a node that sees node-1 live: %v, want ErrLeaseHeld", i, err)
		}
	}
	if kept == 0 {
		e.t.Errorf("every round rewrote the lease's expiry; want only those within ttl/2 of it")
	}
}

// testHeartbeatOtherLeases: after quiet rounds, a round given as many
// leases as the owner holds but not the same ones (another node's lease
// in place of one of its own, or one of its own with an older token),
// with no write to any lease row in between, finds the ones it does not
// hold: a store that skips checking each lease in a quiet round must
// notice that the leases given changed (SQLite: their fingerprint).
func testHeartbeatOtherLeases(e *env) {
	mine := e.acquire("orders/0", "node-1")
	old := e.acquire("orders/1", "node-1")
	cur := e.acquire("orders/1", "node-1") // a new token: old is gone
	theirs := e.acquire("orders/2", "node-2")
	ls := []persistence.Lease{mine, cur}
	for range 2 {
		e.advance(time.Second)
		renewed, lost := e.round(ls, longTTL)
		if len(lost) != 0 || !slices.Equal(units(renewed), units(ls)) {
			e.t.Fatalf("renewed %v, lost %v; want %v renewed", units(renewed), lost, units(ls))
		}
		ls = renewed
	}
	for _, c := range []struct {
		what string
		ls   []persistence.Lease
		lost string
	}{
		{"node-2's lease in place of orders/1", []persistence.Lease{ls[0], theirs}, "orders/2"},
		{"orders/1 with its older token", []persistence.Lease{ls[0], old}, "orders/1"},
	} {
		e.advance(time.Second)
		renewed, lost := e.round(c.ls, longTTL)
		if !slices.Equal(lost, []string{c.lost}) || !slices.Equal(units(renewed), []string{"orders/0"}) {
			e.t.Fatalf("%s: renewed %v, lost %v; want orders/0 renewed, %s lost", c.what, units(renewed), lost, c.lost)
		}
		// back to quiet rounds of what node-1 holds
		if renewed, lost = e.round(ls, longTTL); len(lost) != 0 || len(renewed) != 2 {
			e.t.Fatalf("%s: the round after: renewed %v, lost %v; want both renewed", c.what, units(renewed), lost)
		}
		e.round(ls, longTTL)
	}
}
