package sqlite

import (
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"strconv"
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
	return persistence.RenewLeasesOf(ctx, s, owner, ls, ttl)
}

// RenewLeasesChanges implements persistence.ChangesRenewer: RenewLeases
// answered as what differs from ls. A quiet round copies no lease: its
// answer is the leases it extended.
func (s *Store) RenewLeasesChanges(ctx context.Context, owner string, ls []persistence.Lease, ttl time.Duration) (persistence.RenewAnswer, error) {
	if err := persistence.CheckRenewLeases(owner, len(ls), ttl); err != nil {
		return persistence.RenewAnswer{}, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	a, err := s.renewRound(ctx, owner, ls, ttl)
	if err != nil {
		s.checkedMu.Lock()
		delete(s.checked, owner) // the next round checks every lease
		s.checkedMu.Unlock()
		return persistence.RenewAnswer{}, fmt.Errorf("renew %d leases of %s: %w", len(ls), owner, err)
	}
	return a, nil
}

func (s *Store) renewRound(ctx context.Context, owner string, ls []persistence.Lease, ttl time.Duration) (a persistence.RenewAnswer, err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return a, dbErr(err)
	}
	defer rollbackOnError(tx, &err)
	now := s.now()
	var found renewCheck
	if err = tx.StmtContext(ctx, s.stmts.nodeBeat).QueryRowContext(ctx, owner, now).Scan(&found.changes); err != nil {
		return a, dbErr(err)
	}
	if err = tx.StmtContext(ctx, s.stmts.ownerCount).QueryRowContext(ctx, owner).Scan(&found.rows); err != nil {
		return a, dbErr(err)
	}
	found.fp = s.fingerprint(ls)
	s.checkedMu.Lock()
	last, ok := s.checked[owner]
	s.checkedMu.Unlock()
	// held: the leases of ls the owner holds, as stored, in ls's order
	held := ls // a quiet round's leases are the owner's rows as stored
	quiet := ok && last == found && found.rows == int64(len(ls))
	if !quiet {
		if held, a.Lost, a.Skipped, err = s.heldOf(ctx, tx, owner, ls, nil); err != nil {
			return a, err
		}
	}
	ext, gone, expires, delta, err := s.extendDue(ctx, tx, owner, held, now, ttl)
	if err != nil {
		return a, err
	}
	if err = tx.Commit(); err != nil {
		return a, dbErr(err)
	}
	a.Beat = fromNanos(now)
	if quiet {
		found.fp += delta // held is ls, but for what extendDue changed
	} else {
		found.fp = s.fingerprint(held) + delta
	}
	a.Changed, a.Lost = changedOf(owner, ls, held, ext, gone, expires, a.Beat, a.Lost)
	s.checkedMu.Lock()
	s.checked[owner] = found
	s.checkedMu.Unlock()
	return a, nil
}

// changedOf is a round's Changed and Lost: the leases of held (in ls's
// order, as stored) that the round extended (ext, indexes into held, and
// not gone) or whose stored expiry or acquisition differs from ls's, with
// RenewedAt beat; the extended ones found gone join lost (heldOf's, of
// leases not in held), both in ls's order.
func changedOf(owner string, ls, held []persistence.Lease, ext []int, gone map[string]bool, expires, beat time.Time, lost []string) ([]persistence.Lease, []string) {
	var changed []persistence.Lease
	var goneLost []string // in held's order
	i, next := 0, 0       // into ls, ext
	for j, h := range held {
		for i < len(ls) && (ls[i].Unit != h.Unit || ls[i].Token != h.Token) {
			i++
		}
		extended := next < len(ext) && ext[next] == j
		if extended {
			next++
			if gone[h.Unit] {
				goneLost = append(goneLost, h.Unit)
				continue
			}
			h.ExpiresAt = expires
		}
		if !extended && i < len(ls) && h.ExpiresAt.Equal(ls[i].ExpiresAt) && h.AcquiredAt.Equal(ls[i].AcquiredAt) {
			continue
		}
		h.Owner, h.RenewedAt = owner, beat
		changed = append(changed, h)
	}
	if len(goneLost) == 0 {
		return changed, lost
	}
	// merge the two, each in ls's order
	merged := make([]string, 0, len(lost)+len(goneLost))
	k, g := 0, 0
	for _, l := range ls {
		switch {
		case k < len(lost) && lost[k] == l.Unit:
			merged = append(merged, lost[k])
			k++
		case g < len(goneLost) && goneLost[g] == l.Unit:
			merged = append(merged, goneLost[g])
			g++
		}
	}
	return changed, merged
}

// heldOf appends to held the leases of ls owner holds with their tokens,
// as stored, and returns the units of the others as lost (no row of
// owner's for the unit) or skipped (ls names the unit again with another
// token), in ls's order.
func (s *Store) heldOf(ctx context.Context, tx *sql.Tx, owner string, ls, held []persistence.Lease) (_ []persistence.Lease, lost, skipped []string, _ error) {
	arg, err := leasePairs(ls)
	if err != nil {
		return nil, nil, nil, err
	}
	rows, err := tx.StmtContext(ctx, s.stmts.leaseHeld).QueryContext(ctx, owner, arg)
	if err != nil {
		return nil, nil, nil, dbErr(err)
	}
	byUnit, err := leasesByUnit(rows)
	if err != nil {
		return nil, nil, nil, dbErr(err)
	}
	for _, l := range ls {
		switch nl, ok := byUnit[l.Unit]; {
		case ok && nl.Token == l.Token:
			held = append(held, nl)
		case ok:
			// ls named the unit twice, with another token: neither
			// renewed nor lost
			skipped = append(skipped, l.Unit)
		default:
			lost = append(lost, l.Unit)
		}
	}
	return held, lost, skipped, nil
}

// extendDue extends, fenced by owner and token, the leases of held whose
// expiry is less than ttl/2 after now to now + ttl (expires). ext are
// their indexes into held, in order. When the update writes fewer rows
// than it was given, the leases it did not find are no longer held: gone
// names them (a quiet round's leases are the owner's rows, and a round
// that is not quiet has just read them in this transaction, so this does
// not happen unless the file was edited by hand). delta is what the
// extensions add to held's fingerprint (modulo 2^64), the gone ones
// taken out. held is not modified.
func (s *Store) extendDue(ctx context.Context, tx *sql.Tx, owner string, held []persistence.Lease, now int64, ttl time.Duration) (ext []int, gone map[string]bool, expires time.Time, delta uint64, _ error) {
	at := fromNanos(now)
	expires = fromNanos(now + int64(ttl))
	for i := range held {
		if persistence.RenewDue(held[i].ExpiresAt, at, ttl) {
			ext = append(ext, i)
		}
	}
	if len(ext) == 0 {
		return nil, nil, expires, 0, nil
	}
	dueLeases := make([]persistence.Lease, len(ext))
	for k, i := range ext {
		dueLeases[k] = held[i]
	}
	arg, err := leasePairs(dueLeases)
	if err != nil {
		return nil, nil, expires, 0, err
	}
	res, err := tx.StmtContext(ctx, s.stmts.leaseRenewMany).ExecContext(ctx, now+int64(ttl), now, owner, arg)
	if err != nil {
		return nil, nil, expires, 0, dbErr(err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return nil, nil, expires, 0, dbErr(err)
	}
	if n < int64(len(ext)) {
		// Which? Those no longer held; the others are the rows updated.
		_, left, _, err := s.heldOf(ctx, tx, owner, dueLeases, nil)
		if err != nil {
			return nil, nil, expires, 0, err
		}
		gone = make(map[string]bool, len(left))
		for _, u := range left {
			gone[u] = true
		}
	}
	for _, i := range ext {
		l := held[i]
		delta -= s.leaseHash(l)
		if gone[l.Unit] {
			continue
		}
		l.ExpiresAt = expires
		delta += s.leaseHash(l)
	}
	return ext, gone, expires, delta, nil
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

// leasePairs is the JSON object of unit: token pairs the lease statements
// take (json_each gives each pair as its key and value, with no
// json_extract per lease). A unit of plain printable ASCII (every unit the
// runtime makes) is written as it is; any other goes through
// encoding/json.
func leasePairs(ls []persistence.Lease) (string, error) {
	b := make([]byte, 0, len(ls)*24+2)
	b = append(b, '{')
	for i, l := range ls {
		if i > 0 {
			b = append(b, ',')
		}
		if plainJSON(l.Unit) {
			b = append(b, '"')
			b = append(b, l.Unit...)
			b = append(b, '"')
		} else {
			q, err := json.Marshal(l.Unit)
			if err != nil {
				return "", err
			}
			b = append(b, q...)
		}
		b = append(b, ':')
		b = strconv.AppendInt(b, l.Token, 10)
	}
	b = append(b, '}')
	return string(b), nil
}

// plainJSON reports whether s needs no escaping in a JSON string: only
// printable ASCII, neither a quote nor a backslash.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// fingerprint is a 64-bit digest of the leases' units, tokens, expiries
// and acquisitions that does not depend on their order: the sum of
// leaseHash of each, so that a change of some leases changes it by their
// hashes alone (extendDue).
func (s *Store) fingerprint(ls []persistence.Lease) uint64 {
	var sum uint64
	for i := range ls {
		sum += s.leaseHash(ls[i])
	}
	return sum
}

// leaseHash hashes a lease's unit, token, expiry and acquisition, with the
// store's seed (fingerprints are compared only within this process).
func (s *Store) leaseHash(l persistence.Lease) uint64 {
	var b [32]byte
	binary.LittleEndian.PutUint64(b[0:], maphash.String(s.fpSeed, l.Unit))
	binary.LittleEndian.PutUint64(b[8:], uint64(l.Token))
	binary.LittleEndian.PutUint64(b[16:], uint64(l.ExpiresAt.UnixNano()))
	binary.LittleEndian.PutUint64(b[24:], uint64(l.AcquiredAt.UnixNano()))
	return maphash.Bytes(s.fpSeed, b[:])
}
