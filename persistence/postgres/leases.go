package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/drover-dev/drover/persistence"
)

func scanLease(row pgx.Row) (persistence.Lease, error) {
	var l persistence.Lease
	err := row.Scan(&l.Unit, &l.Owner, &l.Token, &l.ExpiresAt, &l.AcquiredAt)
	l.ExpiresAt, l.AcquiredAt = l.ExpiresAt.UTC(), l.AcquiredAt.UTC()
	return l, err
}

// Acquire implements persistence.Leases. It refuses an empty unit or owner
// and a TTL <= 0; an empty req.Live takes over any lease held by someone
// else (callers pass their whole membership view).
func (s *Store) Acquire(ctx context.Context, req persistence.AcquireRequest) (persistence.Lease, error) {
	switch {
	case req.Unit == "":
		return persistence.Lease{}, errors.New("acquire: empty unit")
	case req.Owner == "":
		return persistence.Lease{}, fmt.Errorf("acquire %s: empty owner", req.Unit)
	case req.TTL <= 0:
		return persistence.Lease{}, fmt.Errorf("acquire %s: ttl %s: must be positive", req.Unit, req.TTL)
	}
	live := req.Live
	if live == nil {
		live = []string{} // NULL would make the takeover test unknown
	}
	// The lease may be freed between a refused attempt and the read of its
	// holder; try again a few times before reporting a holder that is gone.
	var holder persistence.Lease
	for range 3 {
		l, err := scanLease(s.pool.QueryRow(ctx, s.sql.acquire, req.Unit, req.Owner, req.TTL, live))
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return persistence.Lease{}, wrapf(err, "acquire %s", req.Unit)
		}
		holder, err = scanLease(s.pool.QueryRow(ctx, s.sql.holder, req.Unit))
		if errors.Is(err, pgx.ErrNoRows) {
			continue // deleted by hand meanwhile
		}
		if err != nil {
			return persistence.Lease{}, wrapf(err, "acquire %s: read holder", req.Unit)
		}
		if holder.Owner != "" && holder.Owner != req.Owner && slices.Contains(req.Live, holder.Owner) {
			break // held by a live owner; expiry is the server's to judge
		}
	}
	return persistence.Lease{}, &persistence.LeaseHeldError{Holder: holder}
}

// Renew implements persistence.Leases. A lease past its expiry that nobody
// took over is still held by its token and can be renewed.
func (s *Store) Renew(ctx context.Context, l persistence.Lease, ttl time.Duration) (persistence.Lease, error) {
	if ttl <= 0 {
		return persistence.Lease{}, fmt.Errorf("renew lease %s: ttl %s: must be positive", l.Unit, ttl)
	}
	nl, err := scanLease(s.pool.QueryRow(ctx, s.sql.renew, l.Unit, l.Owner, l.Token, ttl))
	if errors.Is(err, pgx.ErrNoRows) {
		return persistence.Lease{}, fmt.Errorf("renew lease %s: token %d of %s: %w", l.Unit, l.Token, l.Owner, persistence.ErrLeaseLost)
	}
	if err != nil {
		return persistence.Lease{}, wrapf(err, "renew lease %s", l.Unit)
	}
	return nl, nil
}

// Release implements persistence.Leases: the owner becomes empty, the
// token stays and the lease expires now.
func (s *Store) Release(ctx context.Context, l persistence.Lease) error {
	tag, err := s.pool.Exec(ctx, s.sql.release, l.Unit, l.Owner, l.Token)
	if err != nil {
		return wrapf(err, "release lease %s", l.Unit)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("release lease %s: token %d of %s: %w", l.Unit, l.Token, l.Owner, persistence.ErrLeaseLost)
	}
	return nil
}

// List implements persistence.Leases.
func (s *Store) List(ctx context.Context) ([]persistence.Lease, error) {
	rows, err := s.pool.Query(ctx, s.sql.listLeases)
	if err != nil {
		return nil, wrapf(err, "list leases")
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (persistence.Lease, error) { return scanLease(row) })
	if err != nil {
		return nil, wrapf(err, "list leases")
	}
	return out, nil
}
