package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/persistence/internal/sqlstore"
)

// queryAll runs q and scans every row it returns with scan.
func queryAll[T any](ctx context.Context, s *Store, scan func(pgx.Row) (T, error), q string, args ...any) ([]T, error) {
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (T, error) { return scan(row) })
}

// one is what a statement that selects one row found: v, or an error
// that format and args begin, persistence.ErrNotFound where there was no
// row.
func one[T any](v T, err error, format string, args ...any) (T, error) {
	var zero T
	if errors.Is(err, pgx.ErrNoRows) {
		return zero, fmt.Errorf(format+": %w", append(args, persistence.ErrNotFound)...)
	}
	if err != nil {
		return zero, wrapf(err, format, args...)
	}
	return v, nil
}

func scanCheckpoint(row pgx.Row) (persistence.Checkpoint, error) {
	var c persistence.Checkpoint
	err := row.Scan(&c.Unit, &c.Source, &c.Position, &c.Finished, &c.Token, &c.UpdatedAt, &c.StreamID)
	c.UpdatedAt = c.UpdatedAt.UTC()
	return c, err
}

// Checkpoint implements persistence.Checkpoints.
func (s *Store) Checkpoint(ctx context.Context, unit string) (persistence.Checkpoint, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	c, err := scanCheckpoint(s.pool.QueryRow(ctx, s.sql.getCheckpoint, unit))
	return one(c, err, "checkpoint %s", unit)
}

// Checkpoints implements persistence.Checkpoints.
func (s *Store) Checkpoints(ctx context.Context, source string) ([]persistence.Checkpoint, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	out, err := queryAll(ctx, s, scanCheckpoint, s.sql.listCheckpoints, source)
	if err != nil {
		return nil, wrapf(err, "checkpoints of %s", source)
	}
	return out, nil
}

func scanDeadLetter(row pgx.Row) (persistence.DeadLetter, error) {
	var d persistence.DeadLetter
	var status string
	err := row.Scan(&d.ID, &d.Source, &d.Unit, &d.Position, &d.MsgKey, &d.Payload, &d.Reason,
		&d.Attempts, &status, &d.FirstFailedAt, &d.LastFailedAt, &d.PayloadBytes)
	d.Status = persistence.DeadLetterStatus(status)
	d.FirstFailedAt, d.LastFailedAt = d.FirstFailedAt.UTC(), d.LastFailedAt.UTC()
	return d, err
}

// DeadLetters implements persistence.DeadLetters.
func (s *Store) DeadLetters(ctx context.Context, f persistence.DeadLetterFilter) ([]persistence.DeadLetter, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	q := s.sql.listDeadLetters
	args := []any{f.AfterID}
	if f.Source != "" {
		args = append(args, f.Source)
		q += " AND source = $" + strconv.Itoa(len(args))
	}
	if f.Status != "" {
		args = append(args, string(f.Status))
		q += " AND status = $" + strconv.Itoa(len(args))
	}
	q += " ORDER BY id"
	if f.Limit > 0 {
		args = append(args, f.Limit)
		q += " LIMIT $" + strconv.Itoa(len(args))
	}
	out, err := queryAll(ctx, s, scanDeadLetter, q, args...)
	if err != nil {
		return nil, wrapf(err, "dead letters")
	}
	return out, nil
}

// DeadLetter implements persistence.DeadLetters.
func (s *Store) DeadLetter(ctx context.Context, id int64) (persistence.DeadLetter, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	d, err := scanDeadLetter(s.pool.QueryRow(ctx, s.sql.getDeadLetter, id))
	return one(d, err, "dead letter %d", id)
}

// SetDeadLetterStatus implements persistence.DeadLetters.
func (s *Store) SetDeadLetterStatus(ctx context.Context, id int64, st persistence.DeadLetterStatus) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	switch st {
	case persistence.DeadLetterPending, persistence.DeadLetterReplayed, persistence.DeadLetterResolved:
	default:
		return fmt.Errorf("set dead letter %d: unknown dead letter status %q", id, st)
	}
	tag, err := s.pool.Exec(ctx, s.sql.setStatus, id, string(st))
	if err != nil {
		return wrapf(err, "set dead letter %d %s", id, st)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("set dead letter %d %s: %w", id, st, persistence.ErrNotFound)
	}
	return nil
}

// WriteQuality implements persistence.Quality; w.ID is ignored and the new
// id returned.
func (s *Store) WriteQuality(ctx context.Context, w persistence.QualityWindow) (int64, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	fields, drift, err := sqlstore.QualityJSON(w)
	if err != nil {
		return 0, err
	}
	var id int64
	if err := s.pool.QueryRow(ctx, s.sql.writeQuality, w.Source, w.Node, w.WindowStart, w.WindowEnd,
		w.RowsRead, w.RowsFailed, fields, drift, w.Status).Scan(&id); err != nil {
		return 0, wrapf(err, "write quality of %s", w.Source)
	}
	return id, nil
}

// QualityWindows implements persistence.Quality: newest (last written)
// first.
func (s *Store) QualityWindows(ctx context.Context, source string, limit int) ([]persistence.QualityWindow, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var lim *int
	if limit > 0 {
		lim = &limit
	}
	out, err := queryAll(ctx, s, func(row pgx.Row) (persistence.QualityWindow, error) {
		var w persistence.QualityWindow
		var fields, drift []byte
		if err := row.Scan(&w.ID, &w.Source, &w.Node, &w.WindowStart, &w.WindowEnd, &w.RowsRead,
			&w.RowsFailed, &fields, &drift, &w.Status); err != nil {
			return w, err
		}
		w.WindowStart, w.WindowEnd = w.WindowStart.UTC(), w.WindowEnd.UTC()
		if err := json.Unmarshal(fields, &w.Fields); err != nil {
			return w, fmt.Errorf("window %d: fields: %w", w.ID, err)
		}
		if err := json.Unmarshal(drift, &w.Drift); err != nil {
			return w, fmt.Errorf("window %d: drift: %w", w.ID, err)
		}
		return w, nil
	}, s.sql.listQuality, source, lim)
	if err != nil {
		return nil, wrapf(err, "quality windows of %s", source)
	}
	return out, nil
}

// PruneDedupe implements persistence.Dedupe. It deletes in chunks of
// sqlstore.PruneChunk rows, each chunk one statement with the store's deadline, so
// that a large backlog (a busy queue's hour) never runs into
// statement_timeout nor holds its locks long; the call goes on until
// nothing older than before is left or ctx ends. On error it returns how
// many it deleted before.
func (s *Store) PruneDedupe(ctx context.Context, before time.Time) (int64, error) {
	total, err := sqlstore.PruneInChunks(ctx, before, s.pruneChunk)
	if err != nil {
		return total, wrapf(err, "prune dedupe (%d rows pruned)", total)
	}
	return total, nil
}

func (s *Store) pruneChunk(ctx context.Context, before time.Time) (int64, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	tag, err := s.pool.Exec(ctx, s.sql.pruneDedupe, before, sqlstore.PruneChunk)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}
