package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/drover-dev/drover/persistence"
)

// Acquire implements persistence.Leases in one immediate transaction, so
// that acquirers in several processes are serialised by SQLite's write lock.
func (s *Store) Acquire(ctx context.Context, req persistence.AcquireRequest) (persistence.Lease, error) {
	l, err := s.acquire(ctx, req)
	if err != nil {
		var held *persistence.LeaseHeldError
		if errors.As(err, &held) {
			return persistence.Lease{}, held
		}
		return persistence.Lease{}, fmt.Errorf("acquire %s: %w", req.Unit, err)
	}
	return l, nil
}

func (s *Store) acquire(ctx context.Context, req persistence.AcquireRequest) (l persistence.Lease, err error) {
	switch {
	case req.Unit == "":
		return l, errors.New("empty unit")
	case req.Owner == "":
		return l, errors.New("empty owner")
	case req.TTL <= 0:
		return l, fmt.Errorf("ttl %s: must be positive", req.TTL)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return l, dbErr(err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	now := s.now()
	cur := persistence.Lease{Unit: req.Unit}
	var expires, acquired int64
	err = tx.StmtContext(ctx, s.stmts.leaseGet).QueryRowContext(ctx, req.Unit).Scan(&cur.Owner, &cur.Token, &expires, &acquired)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return l, dbErr(err)
	default:
		cur.ExpiresAt, cur.AcquiredAt = fromNanos(expires), fromNanos(acquired)
		if !takeable(cur, req, now) {
			return l, &persistence.LeaseHeldError{Holder: cur}
		}
	}
	l = persistence.Lease{
		Unit:       req.Unit,
		Owner:      req.Owner,
		Token:      cur.Token + 1,
		ExpiresAt:  fromNanos(now + int64(req.TTL)),
		AcquiredAt: fromNanos(now),
	}
	if _, err = tx.StmtContext(ctx, s.stmts.leasePut).ExecContext(ctx, l.Unit, l.Owner, l.Token, now+int64(req.TTL), now); err != nil {
		return l, dbErr(err)
	}
	if err = tx.Commit(); err != nil {
		return l, dbErr(err)
	}
	return l, nil
}

// takeable reports whether Acquire may take the lease cur for req at now
// (unix nanoseconds): when it is released, expired (ExpiresAt <= now),
// already req.Owner's, or held by an owner that is not in req.Live.
func takeable(cur persistence.Lease, req persistence.AcquireRequest, now int64) bool {
	return cur.Owner == "" ||
		cur.ExpiresAt.UnixNano() <= now ||
		cur.Owner == req.Owner ||
		!slices.Contains(req.Live, cur.Owner)
}

// Renew implements persistence.Leases with one conditional UPDATE. A lease
// past its expiry that nobody took over can still be renewed.
func (s *Store) Renew(ctx context.Context, l persistence.Lease, ttl time.Duration) (persistence.Lease, error) {
	if ttl <= 0 {
		return persistence.Lease{}, fmt.Errorf("renew lease %s: ttl %s: must be positive", l.Unit, ttl)
	}
	r := persistence.Lease{Unit: l.Unit}
	var expires, acquired int64
	err := s.stmts.leaseRenew.QueryRowContext(ctx, s.now()+int64(ttl), l.Unit, l.Owner, l.Token).
		Scan(&r.Owner, &r.Token, &expires, &acquired)
	if errors.Is(err, sql.ErrNoRows) {
		return persistence.Lease{}, fmt.Errorf("renew lease %s: token %d of %s: %w", l.Unit, l.Token, l.Owner, persistence.ErrLeaseLost)
	}
	if err != nil {
		return persistence.Lease{}, fmt.Errorf("renew lease %s: %w", l.Unit, dbErr(err))
	}
	r.ExpiresAt, r.AcquiredAt = fromNanos(expires), fromNanos(acquired)
	return r, nil
}

// Release implements persistence.Leases: the owner becomes empty, the token
// stays and the lease expires now.
func (s *Store) Release(ctx context.Context, l persistence.Lease) error {
	res, err := s.stmts.leaseRelease.ExecContext(ctx, s.now(), l.Unit, l.Owner, l.Token)
	if err != nil {
		return fmt.Errorf("release lease %s: %w", l.Unit, dbErr(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("release lease %s: %w", l.Unit, dbErr(err))
	}
	if n == 0 {
		return fmt.Errorf("release lease %s: token %d of %s: %w", l.Unit, l.Token, l.Owner, persistence.ErrLeaseLost)
	}
	return nil
}

// List implements persistence.Leases.
func (s *Store) List(ctx context.Context) ([]persistence.Lease, error) {
	rows, err := s.stmts.leaseList.QueryContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("list leases: %w", dbErr(err))
	}
	defer rows.Close()
	var out []persistence.Lease
	for rows.Next() {
		var l persistence.Lease
		var expires, acquired int64
		if err := rows.Scan(&l.Unit, &l.Owner, &l.Token, &expires, &acquired); err != nil {
			return nil, fmt.Errorf("list leases: %w", dbErr(err))
		}
		l.ExpiresAt, l.AcquiredAt = fromNanos(expires), fromNanos(acquired)
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list leases: %w", dbErr(err))
	}
	return out, nil
}
