package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/persistence/internal/sqlstore"
)

// collect scans every row of rows with scan, then closes rows: nil where
// there are none. Its error is scan's or rows.Err's, as it is.
func collect[T any](rows *sql.Rows, scan func(*sql.Rows) (T, error)) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// rollbackOnError, deferred with the address of a function's named error,
// rolls tx back where the function returns an error.
func rollbackOnError(tx *sql.Tx, err *error) {
	if *err != nil {
		_ = tx.Rollback()
	}
}

// Checkpoint implements persistence.Checkpoints.
func (s *Store) Checkpoint(ctx context.Context, unit string) (persistence.Checkpoint, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	c := persistence.Checkpoint{Unit: unit}
	var updated int64
	err := s.db.QueryRowContext(ctx, `SELECT source, position, finished, token, updated_at, stream_id
FROM drover_checkpoints WHERE unit = ?`, unit).Scan(&c.Source, &c.Position, &c.Finished, &c.Token, &updated, &c.StreamID)
	if errors.Is(err, sql.ErrNoRows) {
		return persistence.Checkpoint{}, fmt.Errorf("checkpoint %s: %w", unit, persistence.ErrNotFound)
	}
	if err != nil {
		return persistence.Checkpoint{}, fmt.Errorf("checkpoint %s: %w", unit, dbErr(err))
	}
	c.UpdatedAt = fromNanos(updated)
	return c, nil
}

// Checkpoints implements persistence.Checkpoints.
func (s *Store) Checkpoints(ctx context.Context, source string) ([]persistence.Checkpoint, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	rows, err := s.stmts.checkpointsOf.QueryContext(ctx, source)
	if err != nil {
		return nil, fmt.Errorf("checkpoints of %s: %w", source, dbErr(err))
	}
	out, err := collect(rows, scanCheckpoint)
	if err != nil {
		return nil, fmt.Errorf("checkpoints of %s: %w", source, dbErr(err))
	}
	return out, nil
}

func scanCheckpoint(rows *sql.Rows) (c persistence.Checkpoint, err error) {
	var updated int64
	err = rows.Scan(&c.Unit, &c.Source, &c.Position, &c.Finished, &c.Token, &updated, &c.StreamID)
	c.UpdatedAt = fromNanos(updated)
	return c, err
}

func scanRecord(rows *sql.Rows) (r persistence.Record, err error) {
	var updated int64
	err = rows.Scan(&r.Key, &r.Doc, &r.Source, &r.Unit, &r.Position, &updated)
	r.UpdatedAt = fromNanos(updated)
	return r, err
}

// Records implements persistence.Records. A limit of 0 or less means no
// limit.
func (s *Store) Records(ctx context.Context, table, afterKey string, limit int) ([]persistence.Record, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := persistence.ValidTable(table); err != nil {
		return nil, fmt.Errorf("records: %w", err)
	}
	ts := s.knownTable(table)
	if ts == nil {
		var n int
		err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ? COLLATE NOCASE`, table).Scan(&n)
		if err != nil {
			return nil, fmt.Errorf("records of %s: %w", table, dbErr(err))
		}
		if n == 0 {
			return nil, nil // never written
		}
		if ts, err = s.table(ctx, table); err != nil {
			return nil, fmt.Errorf("records of %s: %w", table, err)
		}
	}
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	rows, err := ts.page.QueryContext(ctx, afterKey, limit)
	if err != nil {
		return nil, fmt.Errorf("records of %s: %w", table, dbErr(err))
	}
	out, err := collect(rows, scanRecord)
	if err != nil {
		return nil, fmt.Errorf("records of %s: %w", table, dbErr(err))
	}
	return out, nil
}

const deadLetterColumns = `id, source, unit, position, msg_key, payload, reason, attempts, status, first_failed_at, last_failed_at, payload_bytes`

func scanDeadLetter(row interface{ Scan(...any) error }) (persistence.DeadLetter, error) {
	var d persistence.DeadLetter
	var first, last int64
	var status string
	err := row.Scan(&d.ID, &d.Source, &d.Unit, &d.Position, &d.MsgKey, &d.Payload, &d.Reason, &d.Attempts, &status, &first, &last, &d.PayloadBytes)
	d.Status = persistence.DeadLetterStatus(status)
	d.FirstFailedAt, d.LastFailedAt = fromNanos(first), fromNanos(last)
	return d, err
}

// DeadLetters implements persistence.DeadLetters.
func (s *Store) DeadLetters(ctx context.Context, f persistence.DeadLetterFilter) ([]persistence.DeadLetter, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	limit := f.Limit
	if limit <= 0 {
		limit = -1
	}
	rows, err := s.db.QueryContext(ctx, `SELECT `+deadLetterColumns+` FROM drover_dead_letters
WHERE (?1 = '' OR source = ?1) AND (?2 = '' OR status = ?2) AND id > ?3
ORDER BY id LIMIT ?4`, f.Source, string(f.Status), f.AfterID, limit)
	if err != nil {
		return nil, fmt.Errorf("dead letters: %w", dbErr(err))
	}
	out, err := collect(rows, func(rows *sql.Rows) (persistence.DeadLetter, error) { return scanDeadLetter(rows) })
	if err != nil {
		return nil, fmt.Errorf("dead letters: %w", dbErr(err))
	}
	return out, nil
}

// DeadLetter implements persistence.DeadLetters.
func (s *Store) DeadLetter(ctx context.Context, id int64) (persistence.DeadLetter, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	d, err := scanDeadLetter(s.db.QueryRowContext(ctx, `SELECT `+deadLetterColumns+` FROM drover_dead_letters WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return persistence.DeadLetter{}, fmt.Errorf("dead letter %d: %w", id, persistence.ErrNotFound)
	}
	if err != nil {
		return persistence.DeadLetter{}, fmt.Errorf("dead letter %d: %w", id, dbErr(err))
	}
	return d, nil
}

// SetDeadLetterStatus implements persistence.DeadLetters.
func (s *Store) SetDeadLetterStatus(ctx context.Context, id int64, st persistence.DeadLetterStatus) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	switch st {
	case persistence.DeadLetterPending, persistence.DeadLetterReplayed, persistence.DeadLetterResolved:
	default:
		return fmt.Errorf("set dead letter %d: unknown status %q", id, st)
	}
	res, err := s.db.ExecContext(ctx, `UPDATE drover_dead_letters SET status = ? WHERE id = ?`, string(st), id)
	if err != nil {
		return fmt.Errorf("set dead letter %d %s: %w", id, st, dbErr(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("set dead letter %d %s: %w", id, st, dbErr(err))
	}
	if n == 0 {
		return fmt.Errorf("set dead letter %d %s: %w", id, st, persistence.ErrNotFound)
	}
	return nil
}

// WriteQuality implements persistence.Quality; w.ID is ignored.
func (s *Store) WriteQuality(ctx context.Context, w persistence.QualityWindow) (int64, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	fields, drift, err := sqlstore.QualityJSON(w)
	if err != nil {
		return 0, err
	}
	var id int64
	err = s.db.QueryRowContext(ctx, `INSERT INTO drover_quality
	(source, node, window_start, window_end, rows_read, rows_failed, fields, drift, status)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
		w.Source, w.Node, w.WindowStart.UnixNano(), w.WindowEnd.UnixNano(), w.RowsRead, w.RowsFailed,
		string(fields), string(drift), w.Status).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("write quality of %s: %w", w.Source, dbErr(err))
	}
	return id, nil
}

// QualityWindows implements persistence.Quality.
func (s *Store) QualityWindows(ctx context.Context, source string, limit int) ([]persistence.QualityWindow, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if limit <= 0 {
		limit = -1
	}
	rows, err := s.db.QueryContext(ctx, `SELECT id, source, node, window_start, window_end, rows_read, rows_failed, fields, drift, status
FROM drover_quality WHERE (?1 = '' OR source = ?1) ORDER BY id DESC LIMIT ?2`, source, limit)
	if err != nil {
		return nil, fmt.Errorf("quality windows of %s: %w", source, dbErr(err))
	}
	defer rows.Close()
	var out []persistence.QualityWindow
	for rows.Next() {
		var w persistence.QualityWindow
		var start, end int64
		var fields, drift []byte
		if err := rows.Scan(&w.ID, &w.Source, &w.Node, &start, &end, &w.RowsRead, &w.RowsFailed, &fields, &drift, &w.Status); err != nil {
			return nil, fmt.Errorf("quality windows of %s: %w", source, dbErr(err))
		}
		w.WindowStart, w.WindowEnd = fromNanos(start), fromNanos(end)
		if err := json.Unmarshal(fields, &w.Fields); err != nil {
			return nil, fmt.Errorf("quality window %d: fields: %w", w.ID, err)
		}
		if err := json.Unmarshal(drift, &w.Drift); err != nil {
			return nil, fmt.Errorf("quality window %d: drift: %w", w.ID, err)
		}
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("quality windows of %s: %w", source, dbErr(err))
	}
	return out, nil
}

// PruneDedupe implements persistence.Dedupe. It deletes in chunks of
// sqlstore.PruneChunk rows, each chunk one statement with the store's deadline, so
// that a large backlog never holds the file's write lock for long (other
// processes wait for it up to busy_timeout); the call goes on until
// nothing older than before is left or ctx ends. On error it returns how
// many it deleted before.
func (s *Store) PruneDedupe(ctx context.Context, before time.Time) (int64, error) {
	total, err := sqlstore.PruneInChunks(ctx, before, s.pruneChunk)
	if err != nil {
		return total, fmt.Errorf("prune dedupe (%d rows pruned): %w", total, dbErr(err))
	}
	return total, nil
}

func (s *Store) pruneChunk(ctx context.Context, before time.Time) (int64, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	res, err := s.db.ExecContext(ctx, `DELETE FROM drover_dedupe WHERE (source, message_id) IN (
	SELECT source, message_id FROM drover_dedupe WHERE applied_at < ? LIMIT ?)`, before.UnixNano(), sqlstore.PruneChunk)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if n > 0 {
		s.ckpt.committed() // a chunk's pages: the WAL copied before the next
	}
	return n, err
}
