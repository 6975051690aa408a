package testkit

import (
	"context"
	"time"

	"github.com/drover-dev/drover/persistence"
)

// RenewLeases skips a locked lease row (FOR UPDATE SKIP LOCKED): neither
// renewed nor lost.
func (a *auditStore) RenewLeases(ctx context.Context, owner string, ls []persistence.Lease, ttl time.Duration) ([]persistence.Lease, []string, error) {
	return persistence.RenewLeasesOf(ctx, a, owner, ls, ttl)
}

// RenewLeasesChanges is RenewLeases as a persistence.RenewAnswer (the
// runtime's leaser asks so when the store can answer so, as the
// cluster's can): a locked row is Skipped.
func (a *auditStore) RenewLeasesChanges(ctx context.Context, owner string, ls []persistence.Lease, ttl time.Duration) (persistence.RenewAnswer, error) {
	if err := a.inject("renew"); err != nil {
		return persistence.RenewAnswer{}, err
	}
	free, locked := ls, map[string]bool(nil)
	if len(a.locks) > 0 {
		free, locked = nil, map[string]bool{}
		for _, l := range ls {
			if until, ok := a.locks[l.Unit]; !ok || !a.c.s.now.Before(until) {
				free = append(free, l)
			} else {
				locked[l.Unit] = true
			}
		}
	}
	ans, err := persistence.RenewChanges(ctx, a.Store, owner, free, ttl)
	if err != nil || len(locked) == 0 {
		return ans, err
	}
	// the skipped, in ls's order: the store's and the locked ones
	skipped := map[string]bool{}
	for _, u := range ans.Skipped {
		skipped[u] = true
	}
	ans.Skipped = nil
	for _, l := range ls {
		if locked[l.Unit] || skipped[l.Unit] {
			ans.Skipped = append(ans.Skipped, l.Unit)
		}
	}
	return ans, nil
}
