package sqlite

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/drover-dev/drover/persistence"
)

// Interim implementations, replaced by the persistence work of issue 9.

// RenewLeases implements persistence.Leases (interim: one Renew per lease).
func (s *Store) RenewLeases(ctx context.Context, owner string, ls []persistence.Lease, ttl time.Duration) ([]persistence.Lease, []string, error) {
	var renewed []persistence.Lease
	var lost []string
	for _, l := range ls {
		l.Owner = owner
		nl, err := s.Renew(ctx, l, ttl)
		switch {
		case errors.Is(err, persistence.ErrLeaseLost):
			lost = append(lost, l.Unit)
		case err != nil:
			return nil, nil, err
		default:
			renewed = append(renewed, nl)
		}
	}
	return renewed, lost, nil
}

// InitSource implements persistence.Sources (interim: not recorded).
func (s *Store) InitSource(ctx context.Context, source string, units []string) ([]string, error) {
	return slices.Compact(slices.Sorted(slices.Values(units))), nil
}
