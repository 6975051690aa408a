package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"

	"github.com/drover-dev/drover/persistence"
)

const controlCols = `source, unit, paused, seek, seek_id, seek_done_id, "by", reason, updated_at, seek_requested_at`

func scanControl(r interface{ Scan(...any) error }) (persistence.Control, error) {
	var c persistence.Control
	var updated, asked int64
	err := r.Scan(&c.Source, &c.Unit, &c.Paused, &c.Seek, &c.SeekID, &c.SeekDoneID, &c.By, &c.Reason, &updated, &asked)
	c.UpdatedAt = fromNanos(updated)
	if asked != 0 {
		c.SeekRequestedAt = fromNanos(asked)
	}
	return c, err
}

// SetControl implements persistence.Controls in one immediate
// transaction: the row and its audit entry commit together.
func (s *Store) SetControl(ctx context.Context, c persistence.ControlChange) (persistence.Control, error) {
	if err := c.Check(); err != nil {
		return persistence.Control{}, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	row, err := s.setControl(ctx, c)
	if err != nil {
		return persistence.Control{}, fmt.Errorf("set control %s of %s: %w", c.Action, c.Source, dbErr(err))
	}
	return row, nil
}

func (s *Store) setControl(ctx context.Context, c persistence.ControlChange) (row persistence.Control, err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return row, err
	}
	defer rollbackOnError(tx, &err)
	cur, err := scanControl(tx.QueryRowContext(ctx, `SELECT `+controlCols+` FROM drover_controls WHERE source = ? AND unit = ?`, c.Source, c.Unit))
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return row, err
	}
	if errors.Is(err, sql.ErrNoRows) {
		cur = persistence.Control{}
	}
	now := s.now()
	row = c.Apply(cur)
	row.UpdatedAt = fromNanos(now)
	var asked int64
	if !row.SeekRequestedAt.IsZero() {
		asked = row.SeekRequestedAt.UnixNano()
	}
	if c.Seek != "" {
		asked, row.SeekRequestedAt = now, row.UpdatedAt
	}
	if _, err = tx.ExecContext(ctx, `INSERT INTO drover_controls (`+controlCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (source, unit) DO UPDATE SET paused = excluded.paused, seek = excluded.seek, seek_id = excluded.seek_id,
	"by" = excluded."by", reason = excluded.reason, updated_at = excluded.updated_at, seek_requested_at = excluded.seek_requested_at`,
		row.Source, row.Unit, row.Paused, row.Seek, row.SeekID, row.SeekDoneID, row.By, row.Reason, now, asked); err != nil {
		return row, err
	}
	if _, err = tx.ExecContext(ctx, `INSERT INTO drover_control_audit (at, node, "by", action, source, unit, args, reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		now, c.Node, c.By, c.Action, c.Source, c.Unit, c.Args, c.Reason); err != nil {
		return row, err
	}
	return row, tx.Commit()
}

// ListControls implements persistence.Controls.
func (s *Store) ListControls(ctx context.Context) ([]persistence.Control, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	rows, err := s.db.QueryContext(ctx, `SELECT `+controlCols+` FROM drover_controls ORDER BY source, unit`)
	if err != nil {
		return nil, fmt.Errorf("list controls: %w", dbErr(err))
	}
	now := fromNanos(s.now())
	out, err := collect(rows, func(r *sql.Rows) (persistence.Control, error) {
		c, err := scanControl(r)
		if !c.SeekRequestedAt.IsZero() {
			c.SeekAge = now.Sub(c.SeekRequestedAt)
		}
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("list controls: %w", dbErr(err))
	}
	return out, nil
}

// WriteAudit implements persistence.Controls.
func (s *Store) WriteAudit(ctx context.Context, e persistence.AuditEntry) (persistence.AuditEntry, error) {
	if e.Action == "" {
		return e, errors.New("write audit: empty action")
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	now := s.now()
	err := s.db.QueryRowContext(ctx, `INSERT INTO drover_control_audit (at, node, "by", action, source, unit, args, reason)
VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`, now, e.Node, e.By, e.Action, e.Source, e.Unit, e.Args, e.Reason).Scan(&e.ID)
	if err != nil {
		return e, fmt.Errorf("write audit %s: %w", e.Action, dbErr(err))
	}
	e.At = fromNanos(now)
	return e, nil
}

// ListAudit implements persistence.Controls.
func (s *Store) ListAudit(ctx context.Context, f persistence.AuditFilter) ([]persistence.AuditEntry, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	since := int64(math.MinInt64)
	if !f.Since.IsZero() {
		since = f.Since.UnixNano()
	}
	limit := -1
	if f.Limit > 0 {
		limit = f.Limit
	}
	rows, err := s.db.QueryContext(ctx, `SELECT id, at, node, "by", action, source, unit, args, reason FROM drover_control_audit
WHERE (?1 = '' OR source = ?1) AND (?2 = '' OR unit = ?2) AND at >= ?3 ORDER BY id DESC LIMIT ?4`, f.Source, f.Unit, since, limit)
	if err != nil {
		return nil, fmt.Errorf("list audit: %w", dbErr(err))
	}
	out, err := collect(rows, func(r *sql.Rows) (persistence.AuditEntry, error) {
		var e persistence.AuditEntry
		var at int64
		err := r.Scan(&e.ID, &at, &e.Node, &e.By, &e.Action, &e.Source, &e.Unit, &e.Args, &e.Reason)
		e.At = fromNanos(at)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("list audit: %w", dbErr(err))
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

// ExpireSeek implements persistence.Controls: the mark and its audit entry
// in one immediate transaction.
func (s *Store) ExpireSeek(ctx context.Context, e persistence.SeekExpiry) (bool, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	ok, err := s.expireSeek(ctx, e)
	if err != nil {
		return false, fmt.Errorf("expire seek %d of %s: %w", e.ID, e.Unit, dbErr(err))
	}
	return ok, nil
}

func (s *Store) expireSeek(ctx context.Context, e persistence.SeekExpiry) (ok bool, err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer rollbackOnError(tx, &err)
	// the age by this store's clock, never the caller's
	res, err := tx.ExecContext(ctx, `UPDATE drover_controls SET seek_done_id = ?1
WHERE source = ?2 AND unit = ?3 AND seek_id = ?1 AND seek_done_id < ?1 AND seek_requested_at BETWEEN 1 AND ?4 - 1`,
		e.ID, e.Source, e.Unit, s.now()-e.OlderThan.Nanoseconds())
	if err != nil {
		return false, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return false, errors.Join(err, tx.Rollback())
	}
	if _, err = tx.ExecContext(ctx, `INSERT INTO drover_control_audit (at, node, "by", action, source, unit, args, reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		s.now(), e.Node, e.By, "seek", e.Source, e.Unit, e.AuditArgs(), e.Reason); err != nil {
		return false, err
	}
	return true, tx.Commit()
}
