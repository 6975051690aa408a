package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/persistence/internal/sqlstore"
)

// Acquire implements persistence.Leases in one immediate transaction, so
// that acquirers in several processes are serialised by SQLite's write lock.
func (s *Store) Acquire(ctx context.Context, req persistence.AcquireRequest) (persistence.Lease, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
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
	case req.Stale < 0:
		return l, fmt.Errorf("stale %s: must not be negative", req.Stale)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return l, dbErr(err)
	}
	defer rollbackOnError(tx, &err)
	now := s.now()
	cur := persistence.Lease{Unit: req.Unit}
	var expires, acquired, renewed int64
	err = tx.StmtContext(ctx, s.stmts.leaseGet).QueryRowContext(ctx, req.Unit).Scan(&cur.Owner, &cur.Token, &expires, &acquired, &renewed)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return l, dbErr(err)
	default:
		cur.ExpiresAt, cur.AcquiredAt, cur.RenewedAt = fromNanos(expires), fromNanos(acquired), fromNanos(renewed)
		if !takeable(cur, req, now) {
			return l, &persistence.LeaseHeldError{Holder: cur}
		}
		if cur.Owner != "" {
			// the holder's token ends: its next round checks every lease
			if _, err = tx.StmtContext(ctx, s.stmts.nodeChanged).ExecContext(ctx, cur.Owner); err != nil {
				return l, dbErr(err)
			}
		}
	}
	l = persistence.Lease{
		Unit:       req.Unit,
		Owner:      req.Owner,
		Token:      cur.Token + 1,
		ExpiresAt:  fromNanos(now + int64(req.TTL)),
		AcquiredAt: fromNanos(now),
		RenewedAt:  fromNanos(now),
	}
	if _, err = tx.StmtContext(ctx, s.stmts.leasePut).ExecContext(ctx, l.Unit, l.Owner, l.Token, now+int64(req.TTL), now, now); err != nil {
		return l, dbErr(err)
	}
	if err = tx.Commit(); err != nil {
		return l, dbErr(err)
	}
	l.PrevOwner, l.PrevToken = cur.Owner, cur.Token
	return l, nil
}

// takeable reports whether Acquire may take the lease cur for req at now
// (unix nanoseconds): when it is released, expired (ExpiresAt <= now),
// already req.Owner's, or held by an owner that is not in req.Live and has
// not renewed for req.Stale.
func takeable(cur persistence.Lease, req persistence.AcquireRequest, now int64) bool {
	return cur.Owner == "" ||
		cur.ExpiresAt.UnixNano() <= now ||
		cur.Owner == req.Owner ||
		(!slices.Contains(req.Live, cur.Owner) && now-cur.RenewedAt.UnixNano() >= int64(req.Stale))
}

// Renew implements persistence.Leases with one conditional UPDATE, in an
// immediate transaction that also counts the write in the owner's
// lease_changes. A lease past its expiry that nobody took over can still
// be renewed.
func (s *Store) Renew(ctx context.Context, l persistence.Lease, ttl time.Duration) (persistence.Lease, error) {
	if ttl <= 0 {
		return persistence.Lease{}, fmt.Errorf("renew lease %s: ttl %s: must be positive", l.Unit, ttl)
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	r, err := s.renew(ctx, l, ttl)
	if errors.Is(err, sql.ErrNoRows) {
		return persistence.Lease{}, fmt.Errorf("renew lease %s: token %d of %s: %w", l.Unit, l.Token, l.Owner, persistence.ErrLeaseLost)
	}
	if err != nil {
		return persistence.Lease{}, fmt.Errorf("renew lease %s: %w", l.Unit, dbErr(err))
	}
	return r, nil
}

func (s *Store) renew(ctx context.Context, l persistence.Lease, ttl time.Duration) (r persistence.Lease, err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return r, err
	}
	defer rollbackOnError(tx, &err)
	r.Unit = l.Unit
	var expires, acquired, renewed int64
	now := s.now()
	if err = tx.StmtContext(ctx, s.stmts.leaseRenew).QueryRowContext(ctx, now+int64(ttl), now, l.Unit, l.Owner, l.Token).
		Scan(&r.Owner, &r.Token, &expires, &acquired, &renewed); err != nil {
		return r, err
	}
	if _, err = tx.StmtContext(ctx, s.stmts.nodeChanged).ExecContext(ctx, l.Owner); err != nil {
		return r, err
	}
	if err = tx.Commit(); err != nil {
		return r, err
	}
	r.ExpiresAt, r.AcquiredAt, r.RenewedAt = fromNanos(expires), fromNanos(acquired), fromNanos(renewed)
	return r, nil
}

// scanLease scans a row of unit, owner, token, expires_at, acquired_at,
// renewed_at.
func scanLease(rows *sql.Rows) (l persistence.Lease, err error) {
	var expires, acquired, renewed int64
	err = rows.Scan(&l.Unit, &l.Owner, &l.Token, &expires, &acquired, &renewed)
	l.ExpiresAt, l.AcquiredAt, l.RenewedAt = fromNanos(expires), fromNanos(acquired), fromNanos(renewed)
	return l, err
}

// Release implements persistence.Leases: the owner becomes empty, the token
// stays and the lease expires now; the owner's lease_changes counts it.
func (s *Store) Release(ctx context.Context, l persistence.Lease) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	n, err := s.release(ctx, l)
	if err != nil {
		return fmt.Errorf("release lease %s: %w", l.Unit, dbErr(err))
	}
	if n == 0 {
		return fmt.Errorf("release lease %s: token %d of %s: %w", l.Unit, l.Token, l.Owner, persistence.ErrLeaseLost)
	}
	return nil
}

func (s *Store) release(ctx context.Context, l persistence.Lease) (n int64, err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer rollbackOnError(tx, &err)
	res, err := tx.StmtContext(ctx, s.stmts.leaseRelease).ExecContext(ctx, s.now(), l.Unit, l.Owner, l.Token)
	if err != nil {
		return 0, err
	}
	if n, err = res.RowsAffected(); err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, tx.Rollback() // nothing written
	}
	if _, err = tx.StmtContext(ctx, s.stmts.nodeChanged).ExecContext(ctx, l.Owner); err != nil {
		return 0, err
	}
	return n, tx.Commit()
}

// List implements persistence.Leases.
func (s *Store) List(ctx context.Context) ([]persistence.Lease, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	rows, err := s.stmts.leaseList.QueryContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("list leases: %w", dbErr(err))
	}
	out, err := collect(rows, scanLease)
	if err != nil {
		return nil, fmt.Errorf("list leases: %w", dbErr(err))
	}
	return out, nil
}

// InitSource implements persistence.Sources in one immediate transaction:
// INSERT … ON CONFLICT DO NOTHING, then read what is recorded.
func (s *Store) InitSource(ctx context.Context, source string, units []string) ([]string, error) {
	want, err := sqlstore.WantUnits(source, units)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	arg, err := json.Marshal(want)
	if err != nil {
		return nil, fmt.Errorf("init source %s: %w", source, err)
	}
	got, err := s.initSource(ctx, source, string(arg))
	if err != nil {
		return nil, fmt.Errorf("init source %s: %w", source, err)
	}
	return got, nil
}

func (s *Store) initSource(ctx context.Context, source, units string) (got []string, err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, dbErr(err)
	}
	defer rollbackOnError(tx, &err)
	if _, err = tx.StmtContext(ctx, s.stmts.sourcePut).ExecContext(ctx, source, units, s.now()); err != nil {
		return nil, dbErr(err)
	}
	var stored string
	if err = tx.StmtContext(ctx, s.stmts.sourceGet).QueryRowContext(ctx, source).Scan(&stored); err != nil {
		return nil, dbErr(err)
	}
	if err = tx.Commit(); err != nil {
		return nil, dbErr(err)
	}
	if err = json.Unmarshal([]byte(stored), &got); err != nil {
		return nil, fmt.Errorf("recorded units %q: %w", stored, err)
	}
	return sqlstore.GotUnits(got), nil
}
