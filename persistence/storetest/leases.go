package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/drover-dev/drover/persistence"
)

func testAcquireFree(e *env) {
	before := e.now()
	l := e.acquire("orders/0", "node-1")
	if l.Unit != "orders/0" || l.Owner != "node-1" || l.Token != 1 {
		e.t.Fatalf("lease = %+v, want orders/0 node-1 token 1", l)
	}
	e.wantTime("AcquiredAt", l.AcquiredAt, before)
	e.wantTime("ExpiresAt", l.ExpiresAt, before.Add(longTTL))
	got := e.leases()["orders/0"]
	if got.Owner != "node-1" || got.Token != 1 || !got.ExpiresAt.Equal(l.ExpiresAt) {
		e.t.Errorf("listed lease = %+v, want %+v", got, l)
	}
}

func testAcquireHeld(e *env) {
	l := e.acquire("orders/0", "node-1")
	_, err := e.s.Acquire(e.ctx, persistence.AcquireRequest{
		Unit: "orders/0", Owner: "node-2", TTL: longTTL, Live: []string{"node-1", "node-2"},
	})
	var held *persistence.LeaseHeldError
	if !errors.As(err, &held) {
		e.t.Fatalf("acquire of a held lease: err = %v, want *LeaseHeldError", err)
	}
	if !errors.Is(err, persistence.ErrLeaseHeld) {
		e.t.Errorf("err %v does not match ErrLeaseHeld", err)
	}
	if held.Holder.Owner != "node-1" || held.Holder.Token != l.Token {
		e.t.Errorf("holder = %+v, want node-1 token %d", held.Holder, l.Token)
	}
	if got := e.leases()["orders/0"]; got.Owner != "node-1" || got.Token != 1 {
		e.t.Errorf("lease after a refused acquire = %+v, want node-1 token 1", got)
	}
}

func testAcquireExpired(e *env) {
	ttl := e.shortTTL()
	e.acquireTTL("orders/0", "node-1", ttl)
	live := []string{"node-1", "node-2"}
	req := persistence.AcquireRequest{Unit: "orders/0", Owner: "node-2", TTL: longTTL, Live: live}
	if _, err := e.s.Acquire(e.ctx, req); !errors.Is(err, persistence.ErrLeaseHeld) {
		e.t.Fatalf("acquire before expiry: err = %v, want ErrLeaseHeld", err)
	}
	var l persistence.Lease
	e.waitFor(ttl, "the lease expired and node-2 acquired it", func() bool {
		var err error
		l, err = e.s.Acquire(e.ctx, req)
		if err != nil && !errors.Is(err, persistence.ErrLeaseHeld) {
			e.t.Fatalf("acquire: %v", err)
		}
		return err == nil
	})
	if l.Owner != "node-2" || l.Token != 2 {
		e.t.Errorf("lease = %+v, want node-2 token 2", l)
	}
}

func testExpiryBoundary(e *env) {
	ttl := 10 * time.Second
	e.acquireTTL("orders/0", "node-1", ttl)
	req := persistence.AcquireRequest{Unit: "orders/0", Owner: "node-2", TTL: ttl, Live: []string{"node-1", "node-2"}}
	e.advance(ttl - time.Millisecond)
	if _, err := e.s.Acquire(e.ctx, req); !errors.Is(err, persistence.ErrLeaseHeld) {
		e.t.Fatalf("1ms before expiry: err = %v, want ErrLeaseHeld", err)
	}
	e.advance(time.Millisecond)
	l, err := e.s.Acquire(e.ctx, req)
	if err != nil {
		e.t.Fatalf("at ExpiresAt the lease is expired: %v", err)
	}
	if l.Token != 2 {
		e.t.Errorf("token = %d, want 2", l.Token)
	}
}

func testAcquireOwn(e *env) {
	first := e.acquire("orders/0", "node-1")
	e.advance(time.Second)
	second, err := e.s.Acquire(e.ctx, persistence.AcquireRequest{
		Unit: "orders/0", Owner: "node-1", TTL: 2 * longTTL, Live: []string{"node-1", "node-2"},
	})
	if err != nil {
		e.t.Fatalf("acquire of one's own lease: %v", err)
	}
	if second.Token != first.Token+1 {
		e.t.Errorf("token = %d, want %d: every acquire increments", second.Token, first.Token+1)
	}
	if !second.ExpiresAt.After(first.ExpiresAt) {
		e.t.Errorf("ExpiresAt %s not after the first lease's %s", second.ExpiresAt, first.ExpiresAt)
	}
}

func testTakeover(e *env) {
	old := e.acquire("orders/0", "node-1")
	l, err := e.s.Acquire(e.ctx, persistence.AcquireRequest{
		Unit: "orders/0", Owner: "node-2", TTL: longTTL, Live: []string{"node-2", "node-3"},
	})
	if err != nil {
		e.t.Fatalf("takeover of a lease whose owner is not live: %v", err)
	}
	if l.Owner != "node-2" || l.Token != old.Token+1 {
		e.t.Fatalf("lease = %+v, want node-2 token %d", l, old.Token+1)
	}
	if _, err := e.s.Renew(e.ctx, old, longTTL); !errors.Is(err, persistence.ErrLeaseLost) {
		e.t.Errorf("renew by the old owner: err = %v, want ErrLeaseLost", err)
	}
	if err := e.s.Release(e.ctx, old); !errors.Is(err, persistence.ErrLeaseLost) {
		e.t.Errorf("release by the old owner: err = %v, want ErrLeaseLost", err)
	}
	if got := e.leases()["orders/0"]; got.Owner != "node-2" || got.Token != l.Token {
		e.t.Errorf("lease = %+v, want node-2's", got)
	}
}

// testAcquirePrevious: what Acquire returns names the holder of the
// token before it (the runtime's takeover events), and the other methods
// never report it.
func testAcquirePrevious(e *env) {
	first := e.acquire("orders/0", "node-1")
	if first.PrevOwner != "" || first.PrevToken != 0 {
		e.t.Errorf("first acquire: previous %q token %d, want none", first.PrevOwner, first.PrevToken)
	}
	l, err := e.s.Acquire(e.ctx, persistence.AcquireRequest{Unit: "orders/0", Owner: "node-2", TTL: longTTL, Live: []string{"node-2"}})
	if err != nil {
		e.t.Fatalf("takeover: %v", err)
	}
	if l.PrevOwner != "node-1" || l.PrevToken != first.Token || l.Token != first.Token+1 {
		e.t.Errorf("takeover = %+v, want previous node-1 token %d", l, first.Token)
	}
	if err := e.s.Release(e.ctx, l); err != nil {
		e.t.Fatalf("release: %v", err)
	}
	again := e.acquire("orders/0", "node-3")
	if again.PrevOwner != "" || again.PrevToken != l.Token {
		e.t.Errorf("acquire after a release = %+v, want no previous owner, previous token %d", again, l.Token)
	}
	if got := e.leases()["orders/0"]; got.PrevOwner != "" || got.PrevToken != 0 {
		e.t.Errorf("listed lease %+v carries a previous holder: only Acquire reports it", got)
	}
}

func testRenew(e *env) {
	l := e.acquireTTL("orders/0", "node-1", time.Minute)
	e.advance(30 * time.Second)
	before := e.now()
	r, err := e.s.Renew(e.ctx, l, 2*time.Minute)
	if err != nil {
		e.t.Fatalf("renew: %v", err)
	}
	if r.Token != l.Token || r.Owner != "node-1" {
		e.t.Errorf("renewed lease = %+v, want token %d owner node-1", r, l.Token)
	}
	e.wantTime("renewed ExpiresAt", r.ExpiresAt, before.Add(2*time.Minute))
	if got := e.leases()["orders/0"]; !got.ExpiresAt.Equal(r.ExpiresAt) {
		e.t.Errorf("listed ExpiresAt = %s, want %s", got.ExpiresAt, r.ExpiresAt)
	}

	wrongToken := l
	wrongToken.Token++
	wrongOwner := l
	wrongOwner.Owner = "node-2"
	unknown := l
	unknown.Unit = "orders/9"
	for name, bad := range map[string]persistence.Lease{"token": wrongToken, "owner": wrongOwner, "unit": unknown} {
		if _, err := e.s.Renew(e.ctx, bad, time.Minute); !errors.Is(err, persistence.ErrLeaseLost) {
			e.t.Errorf("renew with a wrong %s: err = %v, want ErrLeaseLost", name, err)
		}
	}
}

func testRelease(e *env) {
	l := e.acquire("orders/0", "node-1")
	if err := e.s.Release(e.ctx, l); err != nil {
		e.t.Fatalf("release: %v", err)
	}
	got, ok := e.leases()["orders/0"]
	if !ok || got.Owner != "" || got.Token != l.Token {
		e.t.Fatalf("released lease = %+v (listed %v), want no owner and token %d", got, ok, l.Token)
	}
	if err := e.s.Release(e.ctx, l); !errors.Is(err, persistence.ErrLeaseLost) {
		e.t.Errorf("second release: err = %v, want ErrLeaseLost", err)
	}
	if _, err := e.s.Renew(e.ctx, l, time.Minute); !errors.Is(err, persistence.ErrLeaseLost) {
		e.t.Errorf("renew after release: err = %v, want ErrLeaseLost", err)
	}
	// node-1 is live, but it released: the lease is free.
	next := e.acquire("orders/0", "node-2", "node-1", "node-2")
	if next.Token != l.Token+1 {
		e.t.Errorf("token after release = %d, want %d", next.Token, l.Token+1)
	}
}

func testListOrdered(e *env) {
	units := []string{"orders/2", "jobs/slot-0", "orders/10", "orders/1"}
	for _, u := range units {
		e.acquire(u, "node-1")
	}
	l := e.acquire("zeta/0", "node-1")
	if err := e.s.Release(e.ctx, l); err != nil {
		e.t.Fatal(err)
	}
	ls, err := e.s.List(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	var got []string
	for _, l := range ls {
		got = append(got, l.Unit)
	}
	want := append(slices.Clone(units), "zeta/0")
	slices.Sort(want)
	if !slices.Equal(got, want) {
		e.t.Errorf("listed units = %v, want %v", got, want)
	}
}

func testAcquireInvalid(e *env) {
	for name, req := range map[string]persistence.AcquireRequest{
		"empty owner":    {Unit: "orders/0", Owner: "", TTL: time.Minute},
		"empty unit":     {Unit: "", Owner: "node-1", TTL: time.Minute},
		"zero ttl":       {Unit: "orders/0", Owner: "node-1", TTL: 0},
		"negative stale": {Unit: "orders/0", Owner: "node-1", TTL: time.Minute, Stale: -time.Second},
	} {
		if _, err := e.s.Acquire(e.ctx, req); err == nil || errors.Is(err, persistence.ErrLeaseHeld) {
			e.t.Errorf("%s: err = %v, want a validation error", name, err)
		}
	}
	if ls := e.leases(); len(ls) != 0 {
		e.t.Errorf("leases after invalid requests: %v", ls)
	}
}

func testConcurrentAcquire(e *env) {
	const contenders = 8
	const units = 5
	var owners []string
	for i := range contenders {
		owners = append(owners, fmt.Sprintf("node-%d", i))
	}
	type result struct {
		owner string
		lease persistence.Lease
		err   error
	}
	results := make([][]result, units)
	var wg sync.WaitGroup
	for u := range units {
		results[u] = make([]result, contenders)
		for i, owner := range owners {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l, err := e.s.Acquire(e.ctx, persistence.AcquireRequest{
					Unit: fmt.Sprintf("race/%d", u), Owner: owner, TTL: longTTL, Live: owners,
				})
				results[u][i] = result{owner, l, err}
			}()
		}
	}
	wg.Wait()
	listed := e.leases()
	for u := range units {
		var winners []result
		for _, r := range results[u] {
			switch {
			case r.err == nil:
				winners = append(winners, r)
			case !errors.Is(r.err, persistence.ErrLeaseHeld):
				e.t.Errorf("race/%d: %s: err = %v, want nil or ErrLeaseHeld", u, r.owner, r.err)
			}
		}
		if len(winners) != 1 {
			e.t.Errorf("race/%d: %d winners %v, want exactly 1", u, len(winners), winners)
			continue
		}
		w := winners[0]
		if w.lease.Token != 1 {
			e.t.Errorf("race/%d: winner's token = %d, want 1", u, w.lease.Token)
		}
		if got := listed[fmt.Sprintf("race/%d", u)]; got.Owner != w.owner || got.Token != 1 {
			e.t.Errorf("race/%d: listed %+v, want the winner %s", u, got, w.owner)
		}
	}
}
