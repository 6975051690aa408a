package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/drover-dev/drover/persistence"
)

// Apply implements persistence.Applier: one transaction, fenced by the
// lease token, with one statement per table for the whole batch (unnest
// arrays, key = ANY), pipelined.
//
// The fence is drover_fence(unit, token) (see the migrations): it locks
// the unit's lease row (SELECT token ... FOR UPDATE) until the transaction
// ends, so an Acquire that would change the token waits, and raises
// SQLSTATE DR001 when the token is not the unit's current one, which
// rolls the transaction back: ErrLeaseLost, nothing written. Because the
// fence fails by raising, it can ride in the same pipeline as the writes.
//
// A stream batch (no dedupe, no handler, a table this Store knows) is
// one round trip: [fence, upsert, delete, dead letters, checkpoint] sent
// together as one implicit transaction that commits at its end.
//
// Otherwise Apply opens a transaction: begin; [fence, dedupe insert]
// (learning which message ids are fresh); [the writes of the fresh ops];
// b.Handle with the fresh OpMessage ops, through a Tx on the transaction
// (it sees the batch's records); commit. A records table this Store has
// not seen yet is created first in that transaction, in its own round
// trip: the driver prepares every statement of a pipeline before running
// any, so the upsert cannot share one with the CREATE TABLE.
//
// Handle's error is returned as is; every other error is wrapped once
// with the unit.
func (s *Store) Apply(ctx context.Context, b *persistence.Batch) (persistence.Applied, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	applied, err := s.apply(ctx, b)
	if err != nil {
		return persistence.Applied{}, s.applyErr(b, err)
	}
	return applied, nil
}

// applyErr is the error Apply returns for b: Handle's error as is, every
// other wrapped once with the unit. A table we created that is gone
// (dropped, or a restore) is created again next time.
func (s *Store) applyErr(b *persistence.Batch, err error) error {
	if isCode(err, codeUndefinedTable) {
		s.forget(b.Table)
	}
	var he *handlerError
	if errors.As(err, &he) {
		return he.err // as is
	}
	return fmt.Errorf("apply %s: %w", b.Unit, err)
}

// MaxBatchBytes is the most bytes (persistence.Op.Size summed over its
// ops) a batch may carry to PostgreSQL. Each kind of write of a batch
// travels as array parameters of one statement, and the server refuses a
// protocol message or an array value over 1 GB — as a protocol violation
// that closes the connection, which would look transient and be retried
// forever. Half of that leaves room for the arrays' own overhead. Apply
// refuses a larger batch as permanent (persistence.ErrPermanent), so the
// runtime splits it; drover check refuses a batch_bytes above it.
const MaxBatchBytes = 512 << 20

// maxBatchBytes is MaxBatchBytes, lowered by tests.
var maxBatchBytes = MaxBatchBytes

// handlerError carries Handle's error out of apply, to be returned as is.
type handlerError struct{ err error }

func (e *handlerError) Error() string { return e.err.Error() }

func (s *Store) apply(ctx context.Context, b *persistence.Batch) (persistence.Applied, error) {
	a, rec, tableKnown, err := s.plan(b)
	if err != nil {
		return persistence.Applied{}, err
	}
	if a.pipelined(tableKnown) {
		return s.applyPipelined(ctx, a, rec)
	}
	return s.applyTx(ctx, a, rec, tableKnown)
}

// plan checks the batch and plans its writes: folded already when it has
// no dedupe. tableKnown says whether its records table is known to exist
// (rec is its statements; nil when the batch writes no records).
func (s *Store) plan(b *persistence.Batch) (a *applyPlan, rec *recordsSQL, tableKnown bool, err error) {
	if b.Reset && b.Checkpoint == "" {
		return nil, nil, false, errors.New("reset to an empty checkpoint")
	}
	size := 0
	for i := range b.Ops {
		op := &b.Ops[i]
		if op.Kind < persistence.OpUpsert || op.Kind > persistence.OpMessage {
			return nil, nil, false, fmt.Errorf("op %d: unknown kind %d", i, op.Kind)
		}
		if op.Kind != persistence.OpMessage { // a handler's message is not sent
			size += op.Size()
		}
	}
	if size > maxBatchBytes {
		return nil, nil, false, persistence.Refused(fmt.Errorf("batch of %d ops holds %d bytes, more than the %d one statement may carry (MaxBatchBytes)",
			len(b.Ops), size, maxBatchBytes))
	}
	a = newApplyPlan(b)
	if !b.Dedupe {
		// Every op is fresh: fold now.
		a.fold(nil)
		if err := a.check(); err != nil {
			return nil, nil, false, err
		}
	}
	tableKnown = true
	if a.touchesTable() {
		if err := persistence.ValidTable(b.Table); err != nil {
			return nil, nil, false, err
		}
		rec, tableKnown = s.records(b.Table)
	}
	return a, rec, tableKnown, nil
}

// pipelined reports whether the planned batch is written in one round
// trip with no transaction of its own (applyPipelined): a stream batch
// with no handler messages to a table known to exist.
func (a *applyPlan) pipelined(tableKnown bool) bool {
	return !a.b.Dedupe && len(a.msgs) == 0 && tableKnown
}

// applyPipelined writes a folded stream batch in one round trip: a
// pipeline of one batch (ApplyGroup's), so that its arrays are encoded as
// the group's are (encodeQuery).
func (s *Store) applyPipelined(ctx context.Context, a *applyPlan, rec *recordsSQL) (persistence.Applied, error) {
	a.rec = rec
	if err := s.pipeline(ctx, []*applyPlan{a})[0]; err != nil {
		return persistence.Applied{}, err
	}
	return a.applied, nil
}

// applyTx writes a batch through an interactive transaction: dedupe,
// handlers, new tables.
func (s *Store) applyTx(ctx context.Context, a *applyPlan, rec *recordsSQL, tableKnown bool) (persistence.Applied, error) {
	b := a.b
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return persistence.Applied{}, wrapf(err, "begin")
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit

	if !tableKnown {
		q := &pgx.Batch{}
		s.queueCreate(q, b.Table, rec)
		if err := sendBatch(ctx, tx, q, func(br pgx.BatchResults) error { return execN(br, 2) }); err != nil {
			return persistence.Applied{}, fmt.Errorf("create table %s: %w", b.Table, err)
		}
	}

	// The fence, then dedupe or, without dedupe, the writes.
	first := &pgx.Batch{}
	first.Queue(s.sql.fence, b.Unit, b.Lease.Token)
	dedupe := b.Dedupe && len(a.ids) > 0
	if dedupe {
		first.Queue(s.sql.dedupe, b.Source, a.ids)
	}
	if !b.Dedupe {
		a.queueWrites(first, s, rec)
	}
	var fresh map[string]bool
	err = sendBatch(ctx, tx, first, func(br pgx.BatchResults) error {
		if err := a.readFence(br); err != nil {
			return err
		}
		if dedupe {
			var err error
			if fresh, err = readFresh(br); err != nil {
				return wrapf(err, "dedupe")
			}
		}
		if !b.Dedupe {
			return a.readWrites(br)
		}
		return nil
	})
	if err != nil {
		return persistence.Applied{}, err
	}

	// The writes of what dedupe let through.
	if b.Dedupe {
		a.fold(fresh)
		if err := a.check(); err != nil {
			return persistence.Applied{}, err
		}
		second := &pgx.Batch{}
		a.queueWrites(second, s, rec)
		if second.Len() > 0 {
			if err := sendBatch(ctx, tx, second, func(br pgx.BatchResults) error { return a.readWrites(br) }); err != nil {
				return persistence.Applied{}, err
			}
		}
	}

	var created map[string]*recordsSQL
	if len(a.msgs) > 0 {
		htx := &handlerTx{s: s, tx: tx, source: b.Source, unit: b.Unit, position: a.lastPosition}
		if !tableKnown {
			htx.created = map[string]*recordsSQL{b.Table: rec} // not committed yet
		}
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

// resultExecer reads the result of the next statement sent: a
// pgx.BatchResults, or a batch of ApplyGroup's pipeline (segment).
type resultExecer interface {
	Exec() (pgconn.CommandTag, error)
}

// readFence reads the fence's result: DR001 is a lost lease.
func (a *applyPlan) readFence(br resultExecer) error {
	_, err := br.Exec()
	if isCode(err, codeLeaseLost) {
		return fmt.Errorf("token %d: %w", a.b.Lease.Token, persistence.ErrLeaseLost)
	}
	if err != nil {
		return wrapf(err, "lock lease")
	}
	return nil
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
	rec          *recordsSQL // the records table's statements (ApplyGroup's pipeline)
	ids          []string    // distinct message ids, sorted (dedupe)
	lastPosition string

	// After fold:
	msgs                []persistence.Op // fresh OpMessage ops
	upKeys, upPositions []string
	upDocs              [][]byte
	delKeys             []string
	dlPositions, dlKeys []string
	dlPayloads          [][]byte
	dlReasons           []string
	dlCounts            []int32
	dlSizes             []int64

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
		// Every transaction inserts (and so locks) the ids of a source in
		// one order: two slots with overlapping redeliveries then wait for
		// each other instead of deadlocking (40P01).
		slices.Sort(a.ids)
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
	// Keys in one order for the same reason as the dedupe ids: units that
	// share a records table write overlapping keys.
	// The folded ops are read in place (FoldIndexes) and sorted as
	// indexes: an Op is 144 bytes, an index 8.
	records := persistence.FoldIndexes(ops)
	slices.SortFunc(records, func(x, y int) int { return strings.Compare(ops[x].Key, ops[y].Key) }) // keys are distinct
	ups := 0
	for _, i := range records {
		if ops[i].Kind == persistence.OpUpsert {
			ups++
		}
	}
	a.upKeys, a.upDocs, a.upPositions = make([]string, 0, ups), make([][]byte, 0, ups), make([]string, 0, ups)
	for _, i := range records {
		op := &ops[i]
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
				a.dlKeys[i], a.dlPayloads[i], a.dlReasons[i] = pgText(op.MsgKey), op.Payload, pgText(op.Reason)
				a.dlSizes[i] = persistence.StoredPayloadBytes(&op)
				a.dlCounts[i]++
				continue
			}
			at[op.Position] = len(a.dlPositions)
			a.dlPositions = append(a.dlPositions, op.Position)
			a.dlKeys = append(a.dlKeys, pgText(op.MsgKey))
			a.dlPayloads = append(a.dlPayloads, op.Payload)
			a.dlReasons = append(a.dlReasons, pgText(op.Reason))
			a.dlCounts = append(a.dlCounts, 1)
			a.dlSizes = append(a.dlSizes, persistence.StoredPayloadBytes(&op))
		case persistence.OpMessage:
			a.msgs = append(a.msgs, op)
		}
	}
}

// pgText makes s storable in a text column: PostgreSQL refuses NUL bytes
// and invalid UTF-8, and a dead letter must never fail its batch because
// its message key is binary (the payload column keeps the raw bytes).
func pgText(s string) string {
	if utf8.ValidString(s) && !strings.Contains(s, "\x00") {
		return s
	}
	return strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", "\uFFFD"), "\uFFFD")
}

// check refuses a plan the store cannot write.
func (a *applyPlan) check() error {
	if len(a.msgs) > 0 && a.b.Handle == nil {
		return fmt.Errorf("%d message ops and no Handle", len(a.msgs))
	}
	return nil
}

// writesCheckpoint reports whether the batch moves or finishes its
// checkpoint.
func (a *applyPlan) writesCheckpoint() bool { return a.b.Checkpoint != "" || a.b.Finished }

// queueWrites queues one statement per kind of write that the folded batch
// has.
func (a *applyPlan) queueWrites(q *pgx.Batch, s *Store, rec *recordsSQL) {
	b := a.b
	if len(a.upKeys) > 0 {
		q.Queue(rec.upsert, a.upKeys, a.upDocs, a.upPositions, b.Source, b.Unit)
	}
	if len(a.delKeys) > 0 {
		q.Queue(rec.deletes, a.delKeys)
	}
	if len(a.dlPositions) > 0 {
		q.Queue(s.sql.deadLetters, b.Source, b.Unit, a.dlPositions, a.dlKeys, a.dlPayloads, a.dlReasons, a.dlCounts, a.dlSizes)
	}
	switch {
	case b.Reset:
		q.Queue(s.sql.resetCheckpoint, b.Unit, b.Source, b.Checkpoint, b.Lease.Token, b.Finished, b.StreamID)
	case a.writesCheckpoint():
		q.Queue(s.sql.checkpoint, b.Unit, b.Source, b.Checkpoint, b.Lease.Token, b.Finished)
	}
	if b.SeekDone != 0 {
		q.Queue(s.sql.seekDone, b.Source, b.Unit, b.SeekDone)
	}
}

// readWrites reads the results of queueWrites, in the same order: the plan
// does not change between the two.
func (a *applyPlan) readWrites(br resultExecer) error {
	if len(a.upKeys) > 0 {
		tag, err := br.Exec()
		if err != nil {
			return wrapf(err, "upsert into %s", a.b.Table)
		}
		a.applied.Upserted = int(tag.RowsAffected())
		a.applied.Unchanged = len(a.upKeys) - a.applied.Upserted
	}
	if len(a.delKeys) > 0 {
		if _, err := br.Exec(); err != nil {
			return wrapf(err, "delete from %s", a.b.Table)
		}
	}
	if len(a.dlPositions) > 0 {
		if _, err := br.Exec(); err != nil {
			return wrapf(err, "dead letters")
		}
	}
	if a.writesCheckpoint() {
		if _, err := br.Exec(); err != nil {
			return wrapf(err, "checkpoint")
		}
	}
	if a.b.SeekDone != 0 {
		_, err := br.Exec()
		if isCode(err, codeSeekDone) {
			return fmt.Errorf("seek %d: %w", a.b.SeekDone, persistence.ErrSeekDone)
		}
		if err != nil {
			return wrapf(err, "seek done")
		}
	}
	return nil
}
