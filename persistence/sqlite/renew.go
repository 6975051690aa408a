package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/drover-dev/drover/persistence"
)

// renewCheck is what an owner's last renewal round found, in the same
// transaction: its lease_changes, how many lease rows it held, and the
// fingerprint of the leases it was told it holds, as stored after the
// round. A round that finds the first two unchanged and is given leases
// with the same fingerprint, as many as the owner's rows, is given
// exactly the owner's rows as they are stored: nobody else wrote them
// (lease_changes counts every other write: an Acquire that ended one of
// its tokens, its Renew and Release), no row came or went (the count), and
// its own rounds change only what they report. Such a quiet round checks
// no lease one by one.
type renewCheck struct {
	changes, rows int64
	fp            uint64
}

// RenewLeases implements persistence.Leases in one immediate transaction:
// the heartbeat row (drover_nodes), then either nothing more (a quiet
// round, see renewCheck) or one SELECT of ls's rows the owner holds with
// those tokens (json_each), then one UPDATE of the leases due (their
// expiry less than ttl/2 away), fenced by owner and token. SQLite has no
// row locks, so no lease is ever skipped: each is renewed or lost.
// renewed and lost follow the order of ls.
//
// The quiet round is what makes 10,000 idle units cheap: the owner's row
// count is read from the index on owner, and the leases are rewritten
// once per ttl/2. A node whose leases have several TTLs calls once per
// TTL with a part of its rows: its rounds are never quiet (still exact,
// and still writing only the leases due). Calls for one owner are
// expected one at a time (the runtime's leaser makes them so).
func (s *Store) RenewLeases(ctx context.Context, owner string, ls []persistence.Lease, ttl time.Duration) (renewed []persistence.Lease, lost []string, err error) {
	if err := persistence.CheckRenewLeases(owner, len(ls), ttl); err != nil {
		return nil, nil, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	renewed, lost, err = s.renewRound(ctx, owner, ls, ttl)
	if err != nil {
		s.checkedMu.Lock()
		delete(s.checked, owner) // the next round checks every lease
		s.checkedMu.Unlock()
		return nil, nil, fmt.Errorf("renew %d leases of %s: %w", len(ls), owner, err)
	}
	return renewed, lost, nil
}

func (s *Store) renewRound(ctx context.Context, owner string, ls []persistence.Lease, ttl time.Duration) (renewed []persistence.Lease, lost []string, err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, nil, dbErr(err)
	}
	defer rollbackOnError(tx, &err)
	now := s.now()
	var found renewCheck
	if err = tx.StmtContext(ctx, s.stmts.nodeBeat).QueryRowContext(ctx, owner, now).Scan(&found.changes); err != nil {
		return nil, nil, dbErr(err)
	}
	if err = tx.StmtContext(ctx, s.stmts.ownerCount).QueryRowContext(ctx, owner).Scan(&found.rows); err != nil {
		return nil, nil, dbErr(err)
	}
	found.fp = fingerprint(ls)
	s.checkedMu.Lock()
	last, ok := s.checked[owner]
	s.checkedMu.Unlock()
	renewed = make([]persistence.Lease, 0, len(ls))
	quiet := ok && last == found && found.rows == int64(len(ls))
	if quiet {
		for _, l := range ls {
			l.Owner = owner
			renewed = append(renewed, l)
		}
	} else if renewed, lost, err = s.heldOf(ctx, tx, owner, ls, renewed); err != nil {
		return nil, nil, err
	}
	extended := 0
	if renewed, lost, extended, err = s.extendDue(ctx, tx, owner, renewed, lost, now, ttl); err != nil {
		return nil, nil, err
	}
	if err = tx.Commit(); err != nil {
		return nil, nil, dbErr(err)
	}
	for i := range renewed {
		renewed[i].RenewedAt = fromNanos(now) // the heartbeat
	}
	if !quiet || extended > 0 || len(lost) > 0 {
		found.fp = fingerprint(renewed)
	} // else renewed holds ls's units, tokens, expiries and acquisitions
	s.checkedMu.Lock()
	s.checked[owner] = found
	s.checkedMu.Unlock()
	return renewed, lost, nil
}

// heldOf appends to held the leases of ls owner holds with their tokens,
// as stored, and returns the units of the others as lost, in ls's order.
func (s *Store) heldOf(ctx context.Context, tx *sql.Tx, owner string, ls, held []persistence.Lease) ([]persistence.Lease, []string, error) {
	arg, err := leasePairs(ls)
	if err != nil {
		return nil, nil, err
	}
	rows, err := tx.StmtContext(ctx, s.stmts.leaseHeld).QueryContext(ctx, owner, arg)
	if err != nil {
		return nil, nil, dbErr(err)
	}
	byUnit, err := leasesByUnit(rows)
	if err != nil {
		return nil, nil, dbErr(err)
	}
	var lost []string
	for _, l := range ls {
		switch nl, ok := byUnit[l.Unit]; {
		case ok && nl.Token == l.Token:
			held = append(held, nl)
		case ok:
			// ls named the unit twice, with another token.
		default:
			lost = append(lost, l.Unit)
		}
	}
	return held, lost, nil
}

// extendDue extends, fenced by owner and token, the leases of held whose
// expiry is less than ttl/2 after now, replacing them in held with their
// rows as updated. A lease the update does not find is no longer held: it
// moves to lost (a quiet round's leases are the owner's rows, so this
// does not happen unless the file was edited by hand).
func (s *Store) extendDue(ctx context.Context, tx *sql.Tx, owner string, held []persistence.Lease, lost []string, now int64, ttl time.Duration) (_ []persistence.Lease, _ []string, extended int, _ error) {
	var due []persistence.Lease
	for _, l := range held {
		if persistence.RenewDue(l.ExpiresAt, fromNanos(now), ttl) {
			due = append(due, l)
		}
	}
	if len(due) == 0 {
		return held, lost, 0, nil
	}
	arg, err := leasePairs(due)
	if err != nil {
		return nil, nil, 0, err
	}
	rows, err := tx.StmtContext(ctx, s.stmts.leaseRenewMany).QueryContext(ctx, now+int64(ttl), now, owner, arg)
	if err != nil {
		return nil, nil, 0, dbErr(err)
	}
	byUnit, err := leasesByUnit(rows)
	if err != nil {
		return nil, nil, 0, dbErr(err)
	}
	out := held[:0]
	for _, l := range held {
		if !persistence.RenewDue(l.ExpiresAt, fromNanos(now), ttl) {
			out = append(out, l)
			continue
		}
		if nl, ok := byUnit[l.Unit]; ok && nl.Token == l.Token {
			out = append(out, nl)
			continue
		}
		lost = append(lost, l.Unit)
	}
	return out, lost, len(due), nil
}

// leasesByUnit scans lease rows (scanLease) into a map by unit.
func leasesByUnit(rows *sql.Rows) (map[string]persistence.Lease, error) {
	got, err := collect(rows, scanLease)
	if err != nil {
		return nil, err
	}
	byUnit := make(map[string]persistence.Lease, len(got))
	for _, l := range got {
		byUnit[l.Unit] = l
	}
	return byUnit, nil
}

// leasePairs is the JSON list of [unit, token] pairs the lease statements
// take.
func leasePairs(ls []persistence.Lease) (string, error) {
	pairs := make([][2]any, len(ls))
	for i, l := range ls {
		pairs[i] = [2]any{l.Unit, l.Token}
	}
	b, err := json.Marshal(pairs)
	return string(b), err
}

// fingerprint is a 64-bit digest of the leases' units, tokens, expiries
// and acquisitions that does not depend on their order: the sum of an
// FNV-1a hash of each.
func fingerprint(ls []persistence.Lease) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	var sum uint64
	for i := range ls {
		h := uint64(offset)
		for j := 0; j < len(ls[i].Unit); j++ {
			h = (h ^ uint64(ls[i].Unit[j])) * prime
		}
		for _, v := range [3]int64{ls[i].Token, ls[i].ExpiresAt.UnixNano(), ls[i].AcquiredAt.UnixNano()} {
			for k := 0; k < 64; k += 8 {
				h = (h ^ uint64(byte(v>>k))) * prime
			}
		}
		sum += h
	}
	return sum
}
