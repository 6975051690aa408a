package postgres

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/drover-dev/drover/persistence"
)

const controlCols = `source, unit, paused, seek, seek_id, seek_done_id, "by", reason, updated_at, seek_requested_at, ` + seekAgeMicros

// seekAgeSince is when a row's newest seek counts as asked: the later of
// seek_requested_at and updated_at, since a node from before migration 7
// writes a seek without touching seek_requested_at (a pause after a seek
// makes it young again, which only delays its expiry).
const seekAgeSince = `greatest(seek_requested_at, updated_at)`

// seekAgeMicros is the row's seek age in microseconds by the server's
// now(), never a node's clock.
const seekAgeMicros = `(EXTRACT(EPOCH FROM now() - ` + seekAgeSince + `) * 1000000)::bigint`

func scanControl(r pgx.Row) (persistence.Control, error) {
	var c persistence.Control
	var asked *time.Time
	var age int64
	err := r.Scan(&c.Source, &c.Unit, &c.Paused, &c.Seek, &c.SeekID, &c.SeekDoneID, &c.By, &c.Reason, &c.UpdatedAt, &asked, &age)
	c.SeekAge = time.Duration(age) * time.Microsecond
	c.UpdatedAt = c.UpdatedAt.UTC()
	if asked != nil {
		c.SeekRequestedAt = asked.UTC()
	}
	return c, err
}

// SetControl implements persistence.Controls: the row (locked FOR UPDATE
// while the change is computed) and its audit entry in one transaction,
// both stamped with the server's now().
func (s *Store) SetControl(ctx context.Context, c persistence.ControlChange) (persistence.Control, error) {
	if err := c.Check(); err != nil {
		return persistence.Control{}, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	row, err := s.setControl(ctx, c)
	if err != nil {
		return persistence.Control{}, wrapf(err, "set control %s of %s", c.Action, c.Source)
	}
	return row, nil
}

func (s *Store) setControl(ctx context.Context, c persistence.ControlChange) (row persistence.Control, err error) {
	controls, audit := s.name("drover_controls"), s.name("drover_control_audit")
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return row, err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	// the row exists before it is locked, so two first changes of one
	// target serialise too
	if _, err = tx.Exec(ctx, `INSERT INTO `+controls+` (source, unit, updated_at) VALUES ($1, $2, now())
		ON CONFLICT (source, unit) DO NOTHING`, c.Source, c.Unit); err != nil {
		return row, err
	}
	cur, err := scanControl(tx.QueryRow(ctx, `SELECT `+controlCols+` FROM `+controls+` WHERE source = $1 AND unit = $2 FOR UPDATE`, c.Source, c.Unit))
	if err != nil {
		return row, err
	}
	row = c.Apply(cur)
	row, err = scanControl(tx.QueryRow(ctx, `UPDATE `+controls+` SET paused = $3, seek = $4, seek_id = $5, "by" = $6, reason = $7, updated_at = now(),
			seek_requested_at = CASE WHEN $8 THEN now() ELSE seek_requested_at END
		WHERE source = $1 AND unit = $2 RETURNING `+controlCols, row.Source, row.Unit, row.Paused, row.Seek, row.SeekID, row.By, row.Reason, c.Seek != ""))
	if err != nil {
		return row, err
	}
	if _, err = tx.Exec(ctx, `INSERT INTO `+audit+` (at, node, "by", action, source, unit, args, reason)
		VALUES (now(), $1, $2, $3, $4, $5, $6, $7)`, c.Node, c.By, c.Action, c.Source, c.Unit, c.Args, c.Reason); err != nil {
		return row, err
	}
	return row, tx.Commit(ctx)
}

// ListControls implements persistence.Controls.
func (s *Store) ListControls(ctx context.Context) ([]persistence.Control, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	out, err := queryAll(ctx, s, scanControl, `SELECT `+controlCols+` FROM `+s.name("drover_controls")+` ORDER BY source, unit`)
	if err != nil {
		return nil, wrapf(err, "list controls")
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
	err := s.pool.QueryRow(ctx, `INSERT INTO `+s.name("drover_control_audit")+` (at, node, "by", action, source, unit, args, reason)
		VALUES (now(), $1, $2, $3, $4, $5, $6, $7) RETURNING id, at`, e.Node, e.By, e.Action, e.Source, e.Unit, e.Args, e.Reason).Scan(&e.ID, &e.At)
	if err != nil {
		return e, wrapf(err, "write audit %s", e.Action)
	}
	e.At = e.At.UTC()
	return e, nil
}

// ListAudit implements persistence.Controls.
func (s *Store) ListAudit(ctx context.Context, f persistence.AuditFilter) ([]persistence.AuditEntry, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var since, limit any
	if !f.Since.IsZero() {
		since = f.Since
	}
	if f.Limit > 0 {
		limit = f.Limit
	}
	out, err := queryAll(ctx, s, func(r pgx.Row) (persistence.AuditEntry, error) {
		var e persistence.AuditEntry
		err := r.Scan(&e.ID, &e.At, &e.Node, &e.By, &e.Action, &e.Source, &e.Unit, &e.Args, &e.Reason)
		e.At = e.At.UTC()
		return e, err
	}, `SELECT id, at, node, "by", action, source, unit, args, reason FROM `+s.name("drover_control_audit")+`
		WHERE ($1 = '' OR source = $1) AND ($2 = '' OR unit = $2) AND ($3::timestamptz IS NULL OR at >= $3)
		ORDER BY id DESC LIMIT $4`, f.Source, f.Unit, since, limit)
	if err != nil {
		return nil, wrapf(err, "list audit")
	}
	slices.Reverse(out)
	return out, nil
}

// ExpireSeek implements persistence.Controls: the mark and its audit entry
// in one statement (the audit insert runs only when the mark did).
func (s *Store) ExpireSeek(ctx context.Context, e persistence.SeekExpiry) (bool, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	controls, audit := s.name("drover_controls"), s.name("drover_control_audit")
	tag, err := s.pool.Exec(ctx, `WITH marked AS (
			UPDATE `+controls+` SET seek_done_id = $3
			WHERE source = $1 AND unit = $2 AND seek_id = $3 AND seek_done_id < $3
				AND `+seekAgeSince+` < now() - make_interval(secs => $8)
			RETURNING source, unit)
		INSERT INTO `+audit+` (at, node, "by", action, source, unit, args, reason)
		SELECT now(), $4, $5, 'seek', source, unit, $6, $7 FROM marked`,
		e.Source, e.Unit, e.ID, e.Node, e.By, e.AuditArgs(), e.Reason, e.OlderThan.Seconds())
	if err != nil {
		return false, wrapf(err, "expire seek %d of %s", e.ID, e.Unit)
	}
	return tag.RowsAffected() == 1, nil
}
