package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/drover-dev/drover/persistence"
)

var _ persistence.GroupApplier = (*Store)(nil)

// ApplyGroup implements persistence.GroupApplier in one immediate
// transaction: one lock of the database file and one commit (one fsync of
// the WAL) for the whole group. The batches run in order, each checking
// its fence first. A batch whose lease is lost, that the store refuses
// (persistence.ErrPermanent) or whose handler fails has the error Apply
// would return and nothing of it is written; the others commit. A batch
// refused before any transaction (a document that is not JSON, a bad
// table) does not open one. When the transaction itself fails (begin, a
// savepoint, the commit) every batch it held gets that error.
//
// A group without handlers runs without savepoints (oneTx): a savepoint
// per batch costs two statements and a sub-journal copy of every page
// the batch writes that an earlier batch of the group wrote, and a batch
// failing after its fence is rare. When one does, the whole transaction
// is rolled back and the group runs again without it, so that each batch
// still commits or fails alone. A group with a handler keeps a savepoint
// per batch (savepoints): running it again would call its handlers twice.
func (s *Store) ApplyGroup(ctx context.Context, bs []*persistence.Batch) []persistence.GroupResult {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	out := make([]persistence.GroupResult, len(bs))
	tables := make([]*tableStmts, len(bs))
	var todo []int
	handled := false
	for i, b := range bs {
		t, err := s.prepareBatch(ctx, b)
		if err != nil {
			out[i].Err = applyErr(b, err)
			continue
		}
		tables[i] = t
		todo = append(todo, i)
		handled = handled || b.Handle != nil
	}
	g := &group{s: s, bs: bs, tables: tables, out: out, now: s.now()}
	if handled {
		g.savepoints(ctx, todo)
		return out
	}
	for len(todo) > 0 {
		failed := g.oneTx(ctx, todo)
		if failed < 0 {
			break
		}
		todo = slices.DeleteFunc(todo, func(i int) bool { return i == failed })
	}
	return out
}

// group is one ApplyGroup call: its batches, their tables and results.
type group struct {
	s      *Store
	bs     []*persistence.Batch
	tables []*tableStmts
	out    []persistence.GroupResult
	now    int64
}

// failAll gives every batch of todo without an error of its own err.
func (g *group) failAll(todo []int, err error) {
	for _, i := range todo {
		if g.out[i].Err == nil {
			g.out[i] = persistence.GroupResult{Err: applyErr(g.bs[i], err)}
		}
	}
}

// oneTx applies the batches of todo in one transaction without
// savepoints. A batch whose fence fails wrote nothing: it gets its error
// and the others go on. A batch that fails after its fence gets its error,
// the transaction is rolled back, and oneTx returns its index for the
// caller to run the rest again; otherwise it returns -1 (committed, or
// every batch failed with the transaction's error). Only a batch refused
// for itself (persistence.ErrPermanent: a record the store will never
// take) makes the rest run again; any other error after a fence is the
// store's and fails every batch of todo at once.
func (g *group) oneTx(ctx context.Context, todo []int) int {
	for _, i := range todo {
		g.out[i] = persistence.GroupResult{}
	}
	if len(todo) == 0 {
		return -1
	}
	g.s.groupTxs.Add(1)
	tx, err := g.s.db.BeginTx(ctx, nil)
	if err != nil {
		g.failAll(todo, dbErr(err))
		return -1
	}
	for _, i := range todo {
		b := g.bs[i]
		if err := g.s.fence(stmtCtx(ctx), tx, b); errors.Is(err, persistence.ErrLeaseLost) {
			g.out[i].Err = applyErr(b, err)
			continue
		} else if err != nil {
			return g.abort(tx, todo, i, txErr(ctx, err))
		}
		if err := seekNotDone(stmtCtx(ctx), tx, b); errors.Is(err, persistence.ErrSeekDone) {
			g.out[i].Err = applyErr(b, err)
			continue
		} else if err != nil {
			return g.abort(tx, todo, i, txErr(ctx, err))
		}
		a, err := g.s.applyFenced(ctx, tx, b, g.tables[i], g.now)
		err = txErr(ctx, err)
		if err != nil && !persistence.Permanent(err) {
			// Not this batch's own fault (a full disk, an I/O error, the
			// context): running the rest again would meet it again, once
			// per batch. Every batch gets it, as from a failed commit.
			_ = tx.Rollback()
			g.out[i].Err = applyErr(b, err)
			g.failAll(todo, fmt.Errorf("the group's transaction failed in %s's batch: %w", b.Unit, err))
			return -1
		}
		if err != nil {
			return g.abort(tx, todo, i, err)
		}
		g.out[i].Applied = a
	}
	if err := tx.Commit(); err != nil {
		g.failAll(todo, txErr(ctx, dbErr(err)))
		return -1
	}
	g.s.ckpt.committed()
	return -1
}

// abort rolls tx back after batch failed with err and returns failed; when
// the rollback itself fails, every batch gets that error and abort
// returns -1.
func (g *group) abort(tx *sql.Tx, todo []int, failed int, err error) int {
	for _, i := range todo {
		g.out[i] = persistence.GroupResult{}
	}
	g.out[failed].Err = applyErr(g.bs[failed], err)
	if rerr := tx.Rollback(); rerr != nil {
		g.failAll(todo, fmt.Errorf("roll back after %v: %w", err, dbErr(rerr)))
		return -1
	}
	return failed
}

// savepoints applies the batches of todo in one transaction, each inside
// a savepoint of its own that a failing batch is rolled back to.
func (g *group) savepoints(ctx context.Context, todo []int) {
	if len(todo) == 0 {
		return
	}
	tx, err := g.s.db.BeginTx(ctx, nil)
	if err != nil {
		g.failAll(todo, dbErr(err))
		return
	}
	for _, i := range todo {
		if _, err := tx.ExecContext(stmtCtx(ctx), "SAVEPOINT drover_batch"); err != nil {
			_ = tx.Rollback()
			g.failAll(todo, txErr(ctx, fmt.Errorf("savepoint: %w", dbErr(err))))
			return
		}
		a, err := g.s.applyIn(ctx, tx, g.bs[i], g.tables[i], g.now)
		if err != nil {
			err = txErr(ctx, err)
			g.out[i].Err = applyErr(g.bs[i], err)
			if _, rerr := tx.ExecContext(stmtCtx(ctx), "ROLLBACK TO drover_batch"); rerr != nil {
				// SQLite rolled the whole transaction back (an I/O
				// error, a full disk): nothing of the group holds.
				_ = tx.Rollback()
				g.failAll(todo, txErr(ctx, fmt.Errorf("roll back to savepoint after %v: %w", err, dbErr(rerr))))
				return
			}
		} else {
			g.out[i].Applied = a
		}
		if _, err := tx.ExecContext(stmtCtx(ctx), "RELEASE drover_batch"); err != nil {
			_ = tx.Rollback()
			g.failAll(todo, txErr(ctx, fmt.Errorf("release savepoint: %w", dbErr(err))))
			return
		}
	}
	if err := tx.Commit(); err != nil {
		g.failAll(todo, txErr(ctx, dbErr(err)))
		return
	}
	g.s.ckpt.committed()
}
