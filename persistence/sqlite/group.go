package sqlite

import (
	"context"
	"fmt"

	"github.com/drover-dev/drover/persistence"
)

var _ persistence.GroupApplier = (*Store)(nil)

// ApplyGroup implements persistence.GroupApplier in one immediate
// transaction: one lock of the database file and one commit (one fsync of
// the WAL) for the whole group. Each batch runs inside a savepoint of its
// own, in order: its fence is checked first, and a batch whose lease is
// lost, that the store refuses (persistence.ErrPermanent) or whose
// handler fails is rolled back to its savepoint alone, with the error
// Apply would return; the others commit. Handlers run inside the shared
// transaction, as they do in Apply. A batch refused before any
// transaction (a document that is not JSON, a bad table) does not open
// one. When the transaction itself fails (begin, a savepoint, the
// commit) every batch it held gets that error.
func (s *Store) ApplyGroup(ctx context.Context, bs []*persistence.Batch) []persistence.GroupResult {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	out := make([]persistence.GroupResult, len(bs))
	tables := make([]*tableStmts, len(bs))
	var todo []int
	for i, b := range bs {
		t, err := s.prepareBatch(ctx, b)
		if err != nil {
			out[i].Err = applyErr(b, err)
			continue
		}
		tables[i] = t
		todo = append(todo, i)
	}
	if len(todo) == 0 {
		return out
	}
	failAll := func(err error) []persistence.GroupResult {
		for _, i := range todo {
			if out[i].Err == nil {
				out[i] = persistence.GroupResult{Err: applyErr(bs[i], err)}
			}
		}
		return out
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return failAll(dbErr(err))
	}
	now := s.now()
	for _, i := range todo {
		if _, err := tx.ExecContext(ctx, "SAVEPOINT drover_batch"); err != nil {
			_ = tx.Rollback()
			return failAll(fmt.Errorf("savepoint: %w", dbErr(err)))
		}
		a, err := s.applyIn(ctx, tx, bs[i], tables[i], now)
		if err != nil {
			out[i].Err = applyErr(bs[i], err)
			if _, rerr := tx.ExecContext(ctx, "ROLLBACK TO drover_batch"); rerr != nil {
				// SQLite rolled the whole transaction back (an I/O
				// error, a full disk): nothing of the group holds.
				_ = tx.Rollback()
				return failAll(fmt.Errorf("roll back to savepoint after %v: %w", err, dbErr(rerr)))
			}
		} else {
			out[i].Applied = a
		}
		if _, err := tx.ExecContext(ctx, "RELEASE drover_batch"); err != nil {
			_ = tx.Rollback()
			return failAll(fmt.Errorf("release savepoint: %w", dbErr(err)))
		}
	}
	if err := tx.Commit(); err != nil {
		return failAll(dbErr(err))
	}
	return out
}
