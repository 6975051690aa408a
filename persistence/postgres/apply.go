package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/drover-dev/drover/persistence"
)

// Apply implements persistence.Applier.
//
// One transaction, and one statement per table for the whole batch:
//
//  1. First round trip: lock the lease row (SELECT token ... FOR UPDATE)
//     and, with b.Dedupe, insert the batch's message ids, learning which
//     are fresh. Without dedupe the writes of step 2 ride in this round
//     trip too: should the token not match, they are rolled back.
//  2. Second round trip (dedupe only): the records upsert (unnest arrays;
//     an unchanged document is not rewritten), the deletions (key = ANY),
//     the dead letters and the checkpoint.
//  3. b.Handle, with the fresh OpMessage ops, through a Tx on the same
//     transaction: it sees the batch's records.
//  4. Commit.
//
// A token other than the unit's current one returns ErrLeaseLost with
// nothing written. Handle's error is returned as is; every other error is
// wrapped once with the unit.
func (s *Store) Apply(ctx context.Context, b *persistence.Batch) (persistence.Applied, error) {
	applied, err := s.apply(ctx, b)
	if isCode(err, codeUndefinedTable) {
		// A table we created is gone (dropped, or a restore): create it
		// again next time.
		s.forget(b.Table)
	}
	var he *handlerError
	switch {
	case errors.As(err, &he):
		return persistence.Applied{}, he.err // as is
	case err != nil:
		return persistence.Applied{}, fmt.Errorf("apply %s: %w", b.Unit, err)
	}
	return applied, nil
}

// handlerError carries Handle's error out of apply, to be returned as is.
type handlerError struct{ err error }

func (e *handlerError) Error() string { return e.err.Error() }

func (s *Store) apply(ctx context.Context, b *persistence.Batch) (persistence.Applied, error) {
	for i, op := range b.Ops {
		if op.Kind < persistence.OpUpsert || op.Kind > persistence.OpMessage {
			return persistence.Applied{}, fmt.Errorf("op %d: unknown kind %d", i, op.Kind)
		}
	}
	a := newApplyPlan(b)
	// Without dedupe every op is fresh: fold now, and send the writes with
	// the fence.
	writesFirst := !b.Dedupe
	if writesFirst {
		a.fold(nil)
		if err := a.check(); err != nil {
			return persistence.Applied{}, err
		}
	}
	var rec *recordsSQL
	tableKnown := true
	if a.touchesTable() {
		if err := persistence.ValidTable(b.Table); err != nil {
			return persistence.Applied{}, err
		}
		rec, tableKnown = s.records(b.Table)
	}

	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return persistence.Applied{}, wrapf(err, "begin")
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit

	// A records table this Store has not seen is created first, in its
	// own round trip: the driver prepares every statement of a batch
	// before running any, so the upsert cannot share a batch with the
	// CREATE TABLE it depends on.
	if !tableKnown {
		q := &pgx.Batch{}
		s.queueCreate(q, b.Table, rec)
		if err := sendBatch(ctx, tx, q, func(br pgx.BatchResults) error { return execN(br, 2) }); err != nil {
			return persistence.Applied{}, fmt.Errorf("create table %s: %w", b.Table, err)
		}
	}

	// Round trip 1: the fence, then dedupe or, without dedupe, the writes.
	first := &pgx.Batch{}
	first.Queue(s.sql.fence, b.Unit)
	dedupe := b.Dedupe && len(a.ids) > 0
	if dedupe {
		first.Queue(s.sql.dedupe, b.Source, a.ids)
	}
	if writesFirst {
		a.queueWrites(first, s, rec)
	}
	var fresh map[string]bool
	err = sendBatch(ctx, tx, first, func(br pgx.BatchResults) error {
		var token int64
		err := br.QueryRow().Scan(&token)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && token != b.Lease.Token) {
			return fmt.Errorf("token %d: %w", b.Lease.Token, persistence.ErrLeaseLost)
		}
		if err != nil {
			return wrapf(err, "lock lease")
		}
		if dedupe {
			if fresh, err = readFresh(br); err != nil {
				return wrapf(err, "dedupe")
			}
		}
		if writesFirst {
			return a.readWrites(br)
		}
		return nil
	})
	if err != nil {
		return persistence.Applied{}, err
	}

	// Round trip 2: the writes of what dedupe let through.
	if !writesFirst {
		a.fold(fresh)
		if err := a.check(); err != nil {
			return persistence.Applied{}, err
		}
		second := &pgx.Batch{}
		a.queueWrites(second, s, rec)
		if second.Len() > 0 {
			if err := sendBatch(ctx, tx, second, a.readWrites); err != nil {
				return persistence.Applied{}, err
			}
		}
	}

	var created map[string]*recordsSQL
	if len(a.msgs) > 0 {
		htx := &handlerTx{s: s, tx: tx, source: b.Source, unit: b.Unit, position: a.lastPosition}
		err := b.Handle(ctx, htx, a.msgs)
		created = htx.finish()
		if err != nil {
			return persistence.Applied{}, &handlerError{err}
		}
		a.applied.Handled = len(a.msgs)
	}

	if err := tx.Commit(ctx); err != nil {
		return persistence.Applied{}, wrapf(err, "commit")
	}
	if !tableKnown {
		s.created(b.Table, rec)
	}
	for table, r := range created {
		s.created(table, r)
	}
	return a.applied, nil
}

// sendBatch sends q in one round trip, reads its results with read, and
// closes the results. A failure to close (a statement read did not reach
// failed) is translated.
func sendBatch(ctx context.Context, tx pgx.Tx, q *pgx.Batch, read func(pgx.BatchResults) error) error {
	br := tx.SendBatch(ctx, q)
	err := read(br)
	if cerr := br.Close(); err == nil && cerr != nil {
		err = dbErr(cerr)
	}
	return err
}

// readFresh reads the ids the dedupe insert returned.
func readFresh(br pgx.BatchResults) (map[string]bool, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	fresh := make(map[string]bool)
	var id string
	_, err = pgx.ForEachRow(rows, []any{&id}, func() error {
		fresh[id] = true
		return nil
	})
	return fresh, err
}

// execN reads the results of n queued statements that return no rows of
// interest.
func execN(br pgx.BatchResults, n int) error {
	for range n {
		if _, err := br.Exec(); err != nil {
			return dbErr(err)
		}
	}
	return nil
}

// applyPlan is what one batch writes, in the column arrays the statements
// take.
type applyPlan struct {
	b            *persistence.Batch
	ids          []string // distinct message ids, in op order (dedupe)
	lastPosition string

	// After fold:
	msgs                 []persistence.Op // fresh OpMessage ops
	upKeys, upPositions  []string
	upDocs               [][]byte
	delKeys              []string
	dlPositions, dlKeys  []string
	dlPayloads           [][]byte
	dlReasons            []string
	dlCounts             []int32
	checkpoint           bool
	queuedUp, queuedDel  bool
	queuedDL, queuedCkpt bool

	applied persistence.Applied
}

func newApplyPlan(b *persistence.Batch) *applyPlan {
	a := &applyPlan{b: b}
	if n := len(b.Ops); n > 0 {
		a.lastPosition = b.Ops[n-1].Position
	}
	if b.Dedupe {
		seen := make(map[string]bool)
		for _, op := range b.Ops {
			if op.MessageID != "" && !seen[op.MessageID] {
				seen[op.MessageID] = true
				a.ids = append(a.ids, op.MessageID)
			}
		}
	}
	return a
}

// touchesTable reports whether the batch may write its records table:
// whether it has upserts or deletes before dedupe removes any.
func (a *applyPlan) touchesTable() bool {
	for _, op := range a.b.Ops {
		if op.Kind == persistence.OpUpsert || op.Kind == persistence.OpDelete {
			return true
		}
	}
	return false
}

// fold drops the ops whose message id is not fresh (fresh nil: no dedupe),
// folds the records last-op-wins and fills the column arrays.
func (a *applyPlan) fold(fresh map[string]bool) {
	ops := a.b.Ops
	if a.b.Dedupe {
		kept := make([]persistence.Op, 0, len(ops))
		taken := make(map[string]bool)
		for _, op := range ops {
			if id := op.MessageID; id != "" {
				if !fresh[id] || taken[id] {
					// Applied before, or repeated within this batch.
					a.applied.Duplicates = append(a.applied.Duplicates, id)
					continue
				}
				taken[id] = true
			}
			kept = append(kept, op)
		}
		ops = kept
	}
	records := persistence.Fold(ops)
	for _, op := range records {
		if op.Kind == persistence.OpDelete {
			a.delKeys = append(a.delKeys, op.Key)
			continue
		}
		a.upKeys = append(a.upKeys, op.Key)
		a.upDocs = append(a.upDocs, op.Doc)
		a.upPositions = append(a.upPositions, op.Position)
	}
	a.applied.Deleted = len(a.delKeys)
	// Dead letters: one row per position; a position repeated within the
	// batch counts every attempt and keeps the last reason.
	at := make(map[string]int)
	for _, op := range ops {
		switch op.Kind {
		case persistence.OpDeadLetter:
			a.applied.DeadLettered++
			if i, ok := at[op.Position]; ok {
				a.dlKeys[i], a.dlPayloads[i], a.dlReasons[i] = op.MsgKey, op.Payload, op.Reason
				a.dlCounts[i]++
				continue
			}
			at[op.Position] = len(a.dlPositions)
			a.dlPositions = append(a.dlPositions, op.Position)
			a.dlKeys = append(a.dlKeys, op.MsgKey)
			a.dlPayloads = append(a.dlPayloads, op.Payload)
			a.dlReasons = append(a.dlReasons, op.Reason)
			a.dlCounts = append(a.dlCounts, 1)
		case persistence.OpMessage:
			a.msgs = append(a.msgs, op)
		}
	}
	a.checkpoint = a.b.Checkpoint != "" || a.b.Finished
}

// check refuses a plan the store cannot write.
func (a *applyPlan) check() error {
	if len(a.msgs) > 0 && a.b.Handle == nil {
		return fmt.Errorf("%d message ops and no Handle", len(a.msgs))
	}
	return nil
}

// queueWrites queues one statement per kind of write that the batch has.
func (a *applyPlan) queueWrites(q *pgx.Batch, s *Store, rec *recordsSQL) {
	b := a.b
	if a.queuedUp = len(a.upKeys) > 0; a.queuedUp {
		q.Queue(rec.upsert, a.upKeys, a.upDocs, a.upPositions, b.Source, b.Unit)
	}
	if a.queuedDel = len(a.delKeys) > 0; a.queuedDel {
		q.Queue(rec.deletes, a.delKeys)
	}
	if a.queuedDL = len(a.dlPositions) > 0; a.queuedDL {
		q.Queue(s.sql.deadLetters, b.Source, b.Unit, a.dlPositions, a.dlKeys, a.dlPayloads, a.dlReasons, a.dlCounts)
	}
	if a.queuedCkpt = a.checkpoint; a.queuedCkpt {
		q.Queue(s.sql.checkpoint, b.Unit, b.Source, b.Checkpoint, b.Lease.Token, b.Finished)
	}
}

// readWrites reads the results of queueWrites, in the same order.
func (a *applyPlan) readWrites(br pgx.BatchResults) error {
	if a.queuedUp {
		tag, err := br.Exec()
		if err != nil {
			return wrapf(err, "upsert into %s", a.b.Table)
		}
		a.applied.Upserted = int(tag.RowsAffected())
		a.applied.Unchanged = len(a.upKeys) - a.applied.Upserted
	}
	if a.queuedDel {
		if _, err := br.Exec(); err != nil {
			return wrapf(err, "delete from %s", a.b.Table)
		}
	}
	if a.queuedDL {
		if _, err := br.Exec(); err != nil {
			return wrapf(err, "dead letters")
		}
	}
	if a.queuedCkpt {
		if _, err := br.Exec(); err != nil {
			return wrapf(err, "checkpoint")
		}
	}
	return nil
}
