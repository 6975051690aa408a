package storetest

import (
	"errors"
	"reflect"
	"slices"
	"time"

	"github.com/drover-dev/drover/persistence"
)

// staleFor is the Stale of these tests: with a manual clock any value; on
// the wall clock short, so that the tests wait little.
func (e *env) staleFor() time.Duration {
	if e.clk != nil {
		return 5 * time.Second
	}
	return time.Second
}

// pass lets d of the store's time go by: a manual clock is advanced; for a
// store with its own clock the test waits d on the wall clock.
func (e *env) pass(d time.Duration) {
	e.t.Helper()
	if e.clk != nil {
		e.clk.Advance(d)
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-e.ctx.Done():
		e.t.Fatalf("waiting %s: %v", d, e.ctx.Err())
	}
}

// takeover asks for the lease of unit as node-2, with node-1 absent from
// its view.
func (e *env) takeover(unit string, stale time.Duration) (persistence.Lease, error) {
	return e.s.Acquire(e.ctx, persistence.AcquireRequest{
		Unit: unit, Owner: "node-2", TTL: longTTL, Live: []string{"node-2", "node-3"}, Stale: stale,
	})
}

// waitTakeover lets stale go by (waitFor) until node-2's takeover of unit
// wins, and returns its lease.
func (e *env) waitTakeover(unit string, stale time.Duration, what string) persistence.Lease {
	e.t.Helper()
	var l persistence.Lease
	e.waitFor(stale, what, func() bool {
		var err error
		l, err = e.takeover(unit, stale)
		if err != nil && !errors.Is(err, persistence.ErrLeaseHeld) {
			e.t.Fatalf("takeover: %v", err)
		}
		return err == nil
	})
	return l
}

func testRenewedAt(e *env) {
	before := e.now()
	l := e.acquire("orders/0", "node-1")
	e.wantTime("RenewedAt after Acquire", l.RenewedAt, before)
	if !l.RenewedAt.Equal(l.AcquiredAt) {
		e.t.Errorf("RenewedAt %s, AcquiredAt %s: Acquire sets both to the store's now", l.RenewedAt, l.AcquiredAt)
	}
	e.advance(3 * time.Second)
	at := e.now()
	r, err := e.s.Renew(e.ctx, l, time.Minute)
	if err != nil {
		e.t.Fatalf("renew: %v", err)
	}
	e.wantTime("RenewedAt after Renew", r.RenewedAt, at)
	if !r.AcquiredAt.Equal(l.AcquiredAt) {
		e.t.Errorf("Renew moved AcquiredAt from %s to %s", l.AcquiredAt, r.AcquiredAt)
	}
	if e.clk != nil && !r.RenewedAt.After(l.RenewedAt) {
		e.t.Errorf("RenewedAt %s not after the acquire's %s", r.RenewedAt, l.RenewedAt)
	}
	if got := e.leases()["orders/0"]; !got.RenewedAt.Equal(r.RenewedAt) || !got.AcquiredAt.Equal(l.AcquiredAt) {
		e.t.Errorf("listed lease = %+v, want RenewedAt %s and AcquiredAt %s", got, r.RenewedAt, l.AcquiredAt)
	}
	// The holder a refused Acquire reports carries it too.
	_, err = e.s.Acquire(e.ctx, persistence.AcquireRequest{Unit: "orders/0", Owner: "node-2", TTL: longTTL, Live: []string{"node-1", "node-2"}})
	var held *persistence.LeaseHeldError
	if !errors.As(err, &held) {
		e.t.Fatalf("acquire of a held lease: %v, want *LeaseHeldError", err)
	}
	if !held.Holder.RenewedAt.Equal(r.RenewedAt) {
		e.t.Errorf("holder's RenewedAt = %s, want %s", held.Holder.RenewedAt, r.RenewedAt)
	}
}

func testTakeoverWaitsForStale(e *env) {
	stale := e.staleFor()
	old := e.acquire("orders/0", "node-1")
	_, err := e.takeover("orders/0", stale)
	if !errors.Is(err, persistence.ErrLeaseHeld) {
		e.t.Fatalf("takeover of a holder that renewed just now: err = %v, want ErrLeaseHeld", err)
	}
	l := e.waitTakeover("orders/0", stale, "the holder stopped renewing for Stale and node-2 took over")
	if l.Owner != "node-2" || l.Token != old.Token+1 {
		e.t.Errorf("lease = %+v, want node-2 token %d", l, old.Token+1)
	}
	if !l.RenewedAt.Equal(l.AcquiredAt) {
		e.t.Errorf("RenewedAt %s, AcquiredAt %s after a takeover", l.RenewedAt, l.AcquiredAt)
	}
	if _, err := e.s.Renew(e.ctx, old, longTTL); !errors.Is(err, persistence.ErrLeaseLost) {
		e.t.Errorf("renew by the old holder after the takeover: %v, want ErrLeaseLost", err)
	}
}

func testStaleBoundary(e *env) {
	stale := e.staleFor()
	e.acquire("orders/0", "node-1")
	e.advance(stale - time.Millisecond)
	if _, err := e.takeover("orders/0", stale); !errors.Is(err, persistence.ErrLeaseHeld) {
		e.t.Fatalf("1ms before the last renewal is Stale old: err = %v, want ErrLeaseHeld", err)
	}
	e.advance(time.Millisecond)
	if _, err := e.takeover("orders/0", stale); err != nil {
		e.t.Fatalf("a last renewal exactly Stale old is stale: %v", err)
	}
}

// testRenewingHolderKeepsLease renews (alternately with Renew and
// RenewLeases) more often than Stale for twice Stale, trying a takeover
// right after every renewal: a holder that still reaches the store keeps
// its lease whatever the caller's view. Once it stops, the takeover comes.
func testRenewingHolderKeeps(e *env) {
	stale := e.staleFor()
	l := e.acquire("orders/0", "node-1")
	first := l.Token
	step := stale / 4
	for i := range 8 {
		e.pass(step)
		if i%2 == 0 {
			var err error
			if l, err = e.s.Renew(e.ctx, l, longTTL); err != nil {
				e.t.Fatalf("renew %d: %v", i, err)
			}
		} else {
			renewed, lost, err := e.s.RenewLeases(e.ctx, "node-1", []persistence.Lease{l}, longTTL)
			if err != nil || len(renewed) != 1 || len(lost) != 0 {
				e.t.Fatalf("renew leases %d: renewed %v, lost %v, %v; want the lease renewed", i, renewed, lost, err)
			}
			l = renewed[0]
		}
		if _, err := e.takeover("orders/0", stale); !errors.Is(err, persistence.ErrLeaseHeld) {
			e.t.Fatalf("takeover right after renewal %d (%s after the acquire): err = %v, want ErrLeaseHeld",
				i, time.Duration(i+1)*step, err)
		}
	}
	if got := e.leases()["orders/0"]; got.Owner != "node-1" || got.Token != first {
		e.t.Fatalf("lease = %+v, want node-1's token %d throughout", got, first)
	}
	e.waitTakeover("orders/0", stale, "node-1 stopped renewing and node-2 took over")
}

func testExpiredReleasedIgnoreStale(e *env) {
	ttl := e.shortTTL()
	e.acquireTTL("orders/0", "node-1", ttl)
	// Expired: taken over however recently it was renewed, by a caller
	// that even sees its holder live.
	req := persistence.AcquireRequest{Unit: "orders/0", Owner: "node-2", TTL: longTTL,
		Live: []string{"node-1", "node-2"}, Stale: 100 * longTTL}
	e.waitFor(ttl, "the lease expired and node-2 took it whatever Stale", func() bool {
		_, err := e.s.Acquire(e.ctx, req)
		if err != nil && !errors.Is(err, persistence.ErrLeaseHeld) {
			e.t.Fatalf("acquire: %v", err)
		}
		return err == nil
	})
	// Released: free at once.
	l := e.acquire("orders/1", "node-1")
	if err := e.s.Release(e.ctx, l); err != nil {
		e.t.Fatal(err)
	}
	req.Unit = "orders/1"
	if got, err := e.s.Acquire(e.ctx, req); err != nil || got.Token != l.Token+1 {
		e.t.Errorf("acquire of a released lease with a large Stale: %+v, %v; want token %d", got, err, l.Token+1)
	}
	// One's own lease: taken again at once.
	own := e.acquire("orders/2", "node-2")
	req.Unit = "orders/2"
	if got, err := e.s.Acquire(e.ctx, req); err != nil || got.Token != own.Token+1 {
		e.t.Errorf("re-acquire of one's own lease with a large Stale: %+v, %v; want token %d", got, err, own.Token+1)
	}
}

func testRenewLeases(e *env) {
	// a and b expire in a minute: due for a renewal of 2 minutes, which
	// extends a lease whose expiry is less than a minute away.
	a := e.acquireTTL("orders/0", "node-1", time.Minute)
	b := e.acquireTTL("orders/1", "node-1", time.Minute)
	c := e.acquire("orders/2", "node-1")
	taken := e.acquire("orders/2", "node-2", "node-2") // node-1 not live: taken over
	never := persistence.Lease{Unit: "orders/3", Owner: "node-1", Token: 1}
	f := e.acquire("orders/4", "node-1")
	if err := e.s.Release(e.ctx, f); err != nil {
		e.t.Fatal(err)
	}
	held := e.acquire("orders/5", "node-1")
	wrong := held
	wrong.Token += 7
	e.advance(5 * time.Second)
	at := e.now()

	ls := []persistence.Lease{a, b, c, never, wrong, f}
	given := slices.Clone(ls)
	renewed, lost, err := e.s.RenewLeases(e.ctx, "node-1", ls, 2*time.Minute)
	if err != nil {
		e.t.Fatalf("renew leases: %v", err)
	}
	if !reflect.DeepEqual(ls, given) {
		e.t.Errorf("RenewLeases modified its argument: %+v, was %+v", ls, given)
	}
	if len(renewed) != 2 || renewed[0].Unit != "orders/0" || renewed[1].Unit != "orders/1" {
		e.t.Fatalf("renewed = %+v, want orders/0 and orders/1", renewed)
	}
	for i, want := range []persistence.Lease{a, b} {
		r := renewed[i]
		if r.Owner != "node-1" || r.Token != want.Token || !r.AcquiredAt.Equal(want.AcquiredAt) {
			e.t.Errorf("renewed %s = %+v, want node-1 token %d acquired at %s", r.Unit, r, want.Token, want.AcquiredAt)
		}
		e.wantTime(r.Unit+" ExpiresAt", r.ExpiresAt, at.Add(2*time.Minute))
		e.wantTime(r.Unit+" RenewedAt", r.RenewedAt, at)
	}
	if want := []string{"orders/2", "orders/3", "orders/5", "orders/4"}; !slices.Equal(lost, want) {
		e.t.Errorf("lost = %v, want %v (in the order given)", lost, want)
	}
	listed := e.leases()
	for _, r := range renewed {
		if got := listed[r.Unit]; !got.ExpiresAt.Equal(r.ExpiresAt) || !got.RenewedAt.Equal(r.RenewedAt) {
			e.t.Errorf("listed %s = %+v, want the renewal %+v", r.Unit, got, r)
		}
	}
	if got := listed["orders/2"]; got.Owner != "node-2" || got.Token != taken.Token || !got.ExpiresAt.Equal(taken.ExpiresAt) {
		e.t.Errorf("the lease taken over = %+v, want node-2's untouched %+v", got, taken)
	}
	if got := listed["orders/4"]; got.Owner != "" {
		e.t.Errorf("the released lease = %+v, want it still released", got)
	}
	if _, ok := listed["orders/3"]; ok {
		e.t.Error("renewal created a lease that never existed")
	}
	// node-1's heartbeat renews it for the takeover test (RenewedAt), but
	// its row is not extended.
	if got := listed["orders/5"]; got.Token != held.Token || !got.ExpiresAt.Equal(held.ExpiresAt) {
		e.t.Errorf("the lease renewed with a wrong token = %+v, want its expiry untouched %+v", got, held)
	} else {
		e.wantTime("RenewedAt of node-1's lease not renewed (the heartbeat)", got.RenewedAt, at)
	}

	// Only the owner named renews: ls's Owner fields do not count.
	renewed, lost, err = e.s.RenewLeases(e.ctx, "node-2", []persistence.Lease{a}, time.Minute)
	if err != nil || len(renewed) != 0 || !slices.Equal(lost, []string{"orders/0"}) {
		e.t.Errorf("renewal of node-1's lease by node-2: renewed %v, lost %v, %v; want it lost", renewed, lost, err)
	}
	if got := e.leases()["orders/0"]; got.Owner != "node-1" {
		e.t.Errorf("lease = %+v, want node-1's", got)
	}
}

// testRenewLeasesChanges: a store that answers a round as what differs
// from the leases given (persistence.ChangesRenewer) names only the
// leases it extended, the lost and the skipped; a round with nothing due
// answers nothing but its heartbeat; and RenewLeases of the same round
// is that answer made whole (RenewAnswer.Renewed).
func testRenewLeasesChanges(e *env) {
	r, ok := e.s.(persistence.ChangesRenewer)
	if !ok {
		e.t.Skip("the store has no RenewLeasesChanges")
	}
	due := e.acquireTTL("orders/0", "node-1", time.Minute)
	fresh := e.acquireTTL("orders/1", "node-1", 3*time.Hour)
	gone := e.acquire("orders/2", "node-1")
	gone.Token++
	ls := []persistence.Lease{due, fresh, gone}
	given := slices.Clone(ls)
	a, err := r.RenewLeasesChanges(e.ctx, "node-1", ls, 2*time.Hour)
	if err != nil {
		e.t.Fatal(err)
	}
	if !reflect.DeepEqual(ls, given) {
		e.t.Errorf("RenewLeasesChanges modified its argument: %+v, was %+v", ls, given)
	}
	// with a ttl of 2 h, a lease with less than an hour left is due
	if len(a.Changed) != 1 || a.Changed[0].Unit != "orders/0" ||
		!slices.Equal(a.Lost, []string{"orders/2"}) || len(a.Skipped) != 0 || a.Beat.IsZero() {
		e.t.Fatalf("answer %+v; want orders/0 extended (orders/1 not due), orders/2 lost", a)
	}
	for _, c := range a.Changed {
		if c.Owner != "node-1" || !c.RenewedAt.Equal(a.Beat) || !c.ExpiresAt.After(due.ExpiresAt) {
			e.t.Errorf("changed %+v: want node-1's, renewed at the beat %s, extended", c, a.Beat)
		}
	}
	// the next round, given what the store answered: nothing is due
	ls = []persistence.Lease{a.Changed[0], fresh}
	a, err = r.RenewLeasesChanges(e.ctx, "node-1", ls, 2*time.Hour)
	if err != nil || len(a.Changed)+len(a.Lost)+len(a.Skipped) != 0 || a.Beat.IsZero() {
		e.t.Fatalf("a round with nothing due answered %+v, %v; want nothing but the beat", a, err)
	}
	renewed, lost, err := e.s.RenewLeases(e.ctx, "node-1", ls, 2*time.Hour)
	if err != nil || len(lost) != 0 || len(renewed) != 2 {
		e.t.Fatalf("RenewLeases of the same round: %+v, %v, %v", renewed, lost, err)
	}
	for i, l := range renewed {
		if l.Unit != ls[i].Unit || l.Token != ls[i].Token || !l.ExpiresAt.Equal(ls[i].ExpiresAt) || l.Owner != "node-1" {
			e.t.Errorf("renewed %+v, want %+v as given", l, ls[i])
		}
	}
}

// testRenewLeasesTwice: a round that names a unit twice, once with a
// token no longer held, never renews the stale one, in either order.
func testRenewLeasesTwice(e *env) {
	held := e.acquire("orders/0", "node-1")
	stale := held
	stale.Token--
	for _, ls := range [][]persistence.Lease{{held, stale}, {stale, held}} {
		renewed, lost, err := e.s.RenewLeases(e.ctx, "node-1", ls, time.Minute)
		if err != nil {
			e.t.Fatal(err)
		}
		for _, r := range renewed {
			if r.Token != held.Token {
				e.t.Errorf("order %d, %d: renewed the stale token: %+v (lost %v)", ls[0].Token, ls[1].Token, renewed, lost)
			}
		}
		if got := e.leases()["orders/0"]; got.Owner != "node-1" || got.Token != held.Token {
			e.t.Errorf("the lease is %+v, want node-1's token %d", got, held.Token)
		}
	}
}

func testRenewLeasesEdges(e *env) {
	renewed, lost, err := e.s.RenewLeases(e.ctx, "node-1", nil, time.Minute)
	if err != nil || len(renewed) != 0 || len(lost) != 0 {
		e.t.Errorf("renewal of no leases: renewed %v, lost %v, %v; want nothing and no error", renewed, lost, err)
	}
	l := e.acquire("orders/0", "node-1")
	for name, call := range map[string]func() error{
		"zero ttl": func() error {
			_, _, err := e.s.RenewLeases(e.ctx, "node-1", []persistence.Lease{l}, 0)
			return err
		},
		"empty owner": func() error {
			_, _, err := e.s.RenewLeases(e.ctx, "", []persistence.Lease{l}, time.Minute)
			return err
		},
	} {
		if err := call(); err == nil || errors.Is(err, persistence.ErrLeaseLost) {
			e.t.Errorf("%s: err = %v, want a validation error", name, err)
		}
	}
	if got := e.leases()["orders/0"]; !got.ExpiresAt.Equal(l.ExpiresAt) {
		e.t.Errorf("a refused renewal changed the lease: %+v, was %+v", got, l)
	}
}
