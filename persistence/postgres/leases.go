package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/persistence/internal/sqlstore"
)

func scanLease(row pgx.Row, extra ...any) (persistence.Lease, error) {
	var l persistence.Lease
	err := row.Scan(append([]any{&l.Unit, &l.Owner, &l.Token, &l.ExpiresAt, &l.AcquiredAt, &l.RenewedAt}, extra...)...)
	l.ExpiresAt, l.AcquiredAt, l.RenewedAt = l.ExpiresAt.UTC(), l.AcquiredAt.UTC(), l.RenewedAt.UTC()
	return l, err
}

// Acquire implements persistence.Leases. It refuses an empty unit or owner,
// a TTL <= 0 and a negative Stale; an empty req.Live counts every holder
// absent (callers pass their whole membership view). Expiry and staleness
// are judged by the server's now().
func (s *Store) Acquire(ctx context.Context, req persistence.AcquireRequest) (persistence.Lease, error) {
	switch {
	case req.Unit == "":
		return persistence.Lease{}, errors.New("acquire: empty unit")
	case req.Owner == "":
		return persistence.Lease{}, fmt.Errorf("acquire %s: empty owner", req.Unit)
	case req.TTL <= 0:
		return persistence.Lease{}, fmt.Errorf("acquire %s: ttl %s: must be positive", req.Unit, req.TTL)
	case req.Stale < 0:
		return persistence.Lease{}, fmt.Errorf("acquire %s: stale %s: must not be negative", req.Unit, req.Stale)
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	live := req.Live
	if live == nil {
		live = []string{} // NULL would make the takeover test unknown
	}
	// The lease may be freed between a refused attempt and the read of its
	// holder; try again a few times before reporting a holder that is gone.
	var holder persistence.Lease
	for range 3 {
		var prevOwner string
		var prevToken int64
		l, err := scanLease(s.pool.QueryRow(ctx, s.sql.acquire, req.Unit, req.Owner, req.TTL, live, req.Stale), &prevOwner, &prevToken)
		if err == nil {
			l.PrevOwner, l.PrevToken = prevOwner, prevToken
			return l, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return persistence.Lease{}, wrapf(err, "acquire %s", req.Unit)
		}
		var expired, stale bool
		holder, err = scanLease(s.pool.QueryRow(ctx, s.sql.holder, req.Unit, req.Stale), &expired, &stale)
		if errors.Is(err, pgx.ErrNoRows) {
			continue // deleted by hand meanwhile
		}
		if err != nil {
			return persistence.Lease{}, wrapf(err, "acquire %s: read holder", req.Unit)
		}
		takeable := holder.Owner == "" || expired || holder.Owner == req.Owner ||
			(!slices.Contains(req.Live, holder.Owner) && stale)
		if !takeable {
			break // still held as the refusal found it
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
	ctx, cancel := s.bound(ctx)
	defer cancel()
	nl, err := scanLease(s.pool.QueryRow(ctx, s.sql.renew, l.Unit, l.Owner, l.Token, ttl))
	if errors.Is(err, pgx.ErrNoRows) {
		return persistence.Lease{}, fmt.Errorf("renew lease %s: token %d of %s: %w", l.Unit, l.Token, l.Owner, persistence.ErrLeaseLost)
	}
	if err != nil {
		return persistence.Lease{}, wrapf(err, "renew lease %s", l.Unit)
	}
	return nl, nil
}

// RenewLeases implements persistence.Leases with one statement (one round
// trip, s.sql.renewMany): the heartbeat row, and an UPDATE of the leases
// due (expiry less than ttl/2 away) that owner holds with the given
// tokens, locked FOR UPDATE SKIP LOCKED so that a row another transaction
// holds (an Apply's fence, an orphaned transaction) is skipped instead of
// stalling every other renewal; such a lease is neither renewed nor lost.
// Every lease of ls is checked against its row in the statement (exact
// lost), but only what differs from ls comes back: a quiet round of
// 10,000 leases returns one row. renewed and lost follow the order of ls.
func (s *Store) RenewLeases(ctx context.Context, owner string, ls []persistence.Lease, ttl time.Duration) ([]persistence.Lease, []string, error) {
	return persistence.RenewLeasesOf(ctx, s, owner, ls, ttl)
}

// RenewLeasesChanges implements persistence.ChangesRenewer.
func (s *Store) RenewLeasesChanges(ctx context.Context, owner string, ls []persistence.Lease, ttl time.Duration) (persistence.RenewAnswer, error) {
	var a persistence.RenewAnswer
	if err := persistence.CheckRenewLeases(owner, len(ls), ttl); err != nil {
		return a, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	units := make([]string, len(ls))
	tokens := make([]int64, len(ls))
	expires := make([]time.Time, len(ls))
	acquired := make([]time.Time, len(ls))
	for i, l := range ls {
		units[i], tokens[i], expires[i], acquired[i] = l.Unit, l.Token, l.ExpiresAt, l.AcquiredAt
	}
	rows, err := s.pool.Query(ctx, s.sql.renewMany, owner, units, tokens, ttl, expires, acquired)
	if err != nil {
		return a, wrapf(err, "renew %d leases of %s", len(ls), owner)
	}
	var beat time.Time
	type row struct {
		kind  string
		lease persistence.Lease
	}
	got := make(map[string]row)
	type pair struct {
		unit  string
		token int64
	}
	gone := make(map[pair]bool)
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.kind, &r.lease.Unit, &r.lease.Token, &r.lease.ExpiresAt, &r.lease.AcquiredAt); err != nil {
			rows.Close()
			return a, wrapf(err, "renew %d leases of %s", len(ls), owner)
		}
		switch r.kind {
		case "b":
			beat = r.lease.ExpiresAt.UTC()
		case "l":
			gone[pair{r.lease.Unit, r.lease.Token}] = true
		default:
			got[r.lease.Unit] = r
		}
	}
	if err := rows.Err(); err != nil {
		return a, wrapf(err, "renew %d leases of %s", len(ls), owner)
	}
	a.Beat = beat
	for _, l := range ls {
		r, ok := got[l.Unit]
		switch {
		case ok && r.lease.Token != l.Token:
			// ls named the unit twice, with another token.
			a.Skipped = append(a.Skipped, l.Unit)
		case ok && r.kind == "s":
			// due, but its row was locked: still held, not renewed
			a.Skipped = append(a.Skipped, l.Unit)
		case ok:
			nl := r.lease
			nl.Owner, nl.ExpiresAt, nl.AcquiredAt, nl.RenewedAt = owner, nl.ExpiresAt.UTC(), nl.AcquiredAt.UTC(), beat
			if !nl.ExpiresAt.Equal(l.ExpiresAt) || !nl.AcquiredAt.Equal(l.AcquiredAt) {
				a.Changed = append(a.Changed, nl)
			}
		case gone[pair{l.Unit, l.Token}]:
			a.Lost = append(a.Lost, l.Unit)
		default: // held as given, not due
		}
	}
	return a, nil
}

// Release implements persistence.Leases: the owner becomes empty, the
// token stays and the lease expires now.
func (s *Store) Release(ctx context.Context, l persistence.Lease) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
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
	ctx, cancel := s.bound(ctx)
	defer cancel()
	out, err := queryAll(ctx, s, func(row pgx.Row) (persistence.Lease, error) { return scanLease(row) }, s.sql.listLeases)
	if err != nil {
		return nil, wrapf(err, "list leases")
	}
	return out, nil
}

// InitSource implements persistence.Sources: INSERT … ON CONFLICT DO
// NOTHING, then a SELECT in a statement (and snapshot) of its own, so that
// a caller that lost the race reads the winner's units.
func (s *Store) InitSource(ctx context.Context, source string, units []string) ([]string, error) {
	want, err := sqlstore.WantUnits(source, units)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if _, err := s.pool.Exec(ctx, s.sql.initSource, source, want); err != nil {
		return nil, wrapf(err, "init source %s", source)
	}
	var got []string
	if err := s.pool.QueryRow(ctx, s.sql.getSource, source).Scan(&got); err != nil {
		return nil, wrapf(err, "init source %s: read", source)
	}
	return sqlstore.GotUnits(got), nil
}
