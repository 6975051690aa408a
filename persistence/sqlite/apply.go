package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/drover-dev/drover/persistence"
)

// MaxValueBytes is the longest string or BLOB SQLite stores
// (SQLITE_MAX_LENGTH of the driver's build): a longer document or payload
// fails its statement with SQLITE_TOOBIG, a refusal that is permanent.
const MaxValueBytes = 1_000_000_000

// Apply implements persistence.Applier in one immediate transaction: it
// checks the lease token, drops duplicates, writes the folded records, the
// dead letters, runs b.Handle and moves the checkpoint, then commits. Any
// error rolls everything back. Handle runs while the store's one connection
// is in the transaction: it must use its Tx, never the Store (which would
// wait for that connection forever).
func (s *Store) Apply(ctx context.Context, b *persistence.Batch) (persistence.Applied, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	a, err := s.apply(ctx, b)
	if err != nil {
		return persistence.Applied{}, applyErr(b, err)
	}
	return a, nil
}

// applyErr is the error Apply returns for b: Handle's error as is, every
// other wrapped once with the unit.
func applyErr(b *persistence.Batch, err error) error {
	var herr handlerError
	if errors.As(err, &herr) {
		return herr.err
	}
	return fmt.Errorf("apply %s: %w", b.Unit, err)
}

// handlerError carries Handle's error through apply unwrapped.
type handlerError struct{ err error }

func (e handlerError) Error() string { return e.err.Error() }

func (s *Store) apply(ctx context.Context, b *persistence.Batch) (applied persistence.Applied, err error) {
	table, err := s.prepareBatch(ctx, b)
	if err != nil {
		return applied, err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return applied, dbErr(err)
	}
	defer rollbackOnError(tx, &err)
	if applied, err = s.applyIn(ctx, tx, b, table, s.now()); err != nil {
		return applied, txErr(ctx, err)
	}
	if err = tx.Commit(); err != nil {
		return applied, txErr(ctx, dbErr(err))
	}
	s.ckpt.committed()
	return applied, nil
}

// txErr is err, a statement's or a commit's in a transaction under ctx,
// as the caller should see it: when ctx ended, database/sql rolled the
// transaction back, and the statement after that (stmtCtx: it does not
// watch ctx itself) failed with sql.ErrTxDone; the error then says ctx's
// (errors.Is context.Canceled or DeadlineExceeded), not a driver's.
func txErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && errors.Is(err, sql.ErrTxDone) {
		return fmt.Errorf("%w (%v)", cerr, err)
	}
	return err
}

// prepareBatch checks what the batch holds before any transaction and
// makes sure its records table exists (nil when it writes no records).
func (s *Store) prepareBatch(ctx context.Context, b *persistence.Batch) (*tableStmts, error) {
	if b.Reset && b.Checkpoint == "" {
		return nil, errors.New("reset to an empty checkpoint")
	}
	hasRecords := false
	for i, op := range b.Ops {
		switch op.Kind {
		case persistence.OpUpsert:
			// The decoder only passes JSON (and says so: DocChecked); this
			// keeps any other caller's text that is not JSON (JSON5, which
			// SQLite's json() would take) out, with memory's error.
			if !op.DocChecked && !json.Valid(op.Doc) {
				return nil, persistence.Refused(fmt.Errorf("upsert %q: invalid JSON document", op.Key))
			}
			hasRecords = true
		case persistence.OpDelete:
			hasRecords = true
		case persistence.OpDeadLetter, persistence.OpMessage:
		default:
			return nil, fmt.Errorf("op %d: unknown kind %d", i, op.Kind)
		}
	}
	if !hasRecords {
		return nil, nil
	}
	return s.table(ctx, b.Table)
}

// applyIn writes the batch inside tx: the fence, dedupe, records, dead
// letters, Handle and the checkpoint. On an error the caller rolls back
// what it wrote (the transaction, or the batch's savepoint).
func (s *Store) applyIn(ctx context.Context, tx *sql.Tx, b *persistence.Batch, table *tableStmts, now int64) (applied persistence.Applied, err error) {
	if err := s.fence(stmtCtx(ctx), tx, b); err != nil {
		return applied, err
	}
	if err := seekNotDone(stmtCtx(ctx), tx, b); err != nil {
		return applied, err
	}
	return s.applyFenced(ctx, tx, b, table, now)
}

// stmtCtx is the context of the statements inside a write transaction: ctx
// without its cancellation. modernc's driver watches a context that can
// end with a goroutine of its own for every statement (to interrupt SQLite
// when it ends), so a batch of 500 upserts started 500 goroutines. The
// transaction keeps ctx: its BEGIN and COMMIT end with it, database/sql
// rolls it back when ctx ends (a statement running then finishes first,
// and every one after it fails), and applyFenced checks ctx before each
// batch. A statement inside the transaction waits for no lock (BEGIN
// IMMEDIATE took the write lock): none of them can outlast the call's
// bound by more than its own run. A Handle still gets ctx itself.
func stmtCtx(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

// seekNotDone refuses a batch whose SeekDone its control row marks done
// already (persistence.ErrSeekDone), before anything of it is written.
func seekNotDone(ctx context.Context, tx *sql.Tx, b *persistence.Batch) error {
	if b.SeekDone == 0 {
		return nil
	}
	var done int64
	err := tx.QueryRowContext(ctx, `SELECT seek_done_id FROM drover_controls WHERE source = ? AND unit = ?`, b.Source, b.Unit).Scan(&done)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return fmt.Errorf("seek done: %w", dbErr(err))
	case done >= b.SeekDone:
		return fmt.Errorf("seek %d (done: %d): %w", b.SeekDone, done, persistence.ErrSeekDone)
	}
	return nil
}

// fence checks b's lease token inside tx, before anything of b is
// written: persistence.ErrLeaseLost when the unit changed hands.
func (s *Store) fence(ctx context.Context, tx *sql.Tx, b *persistence.Batch) error {
	var token int64
	err := tx.StmtContext(ctx, s.stmts.fence).QueryRowContext(ctx, b.Unit).Scan(&token)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && token != b.Lease.Token) {
		return fmt.Errorf("token %d: %w", b.Lease.Token, persistence.ErrLeaseLost)
	}
	if err != nil {
		return dbErr(err)
	}
	return nil
}

// applyFenced is applyIn after the fence.
func (s *Store) applyFenced(ctx context.Context, tx *sql.Tx, b *persistence.Batch, table *tableStmts, now int64) (applied persistence.Applied, err error) {
	if err := ctx.Err(); err != nil {
		return applied, err
	}
	hctx := ctx // Handle's
	ctx = stmtCtx(ctx)
	fresh := b.Ops
	if b.Dedupe {
		if fresh, err = s.dedupe(ctx, tx, b, now, &applied); err != nil {
			return applied, err
		}
	}

	if err = s.writeRecords(ctx, tx, table, b, persistence.Fold(fresh), now, &applied); err != nil {
		return applied, err
	}

	var msgs []persistence.Op
	dl := tx.StmtContext(ctx, s.stmts.deadLetterPut)
	for _, op := range fresh {
		switch op.Kind {
		case persistence.OpDeadLetter:
			if _, err = dl.ExecContext(ctx, b.Source, b.Unit, op.Position, op.MsgKey, op.Payload, op.Reason, now, now,
				persistence.StoredPayloadBytes(&op)); err != nil {
				return applied, fmt.Errorf("dead letter at %s: %w", op.Position, dbErr(err))
			}
			if err = s.wrote(); err != nil {
				return applied, err
			}
			applied.DeadLettered++
		case persistence.OpMessage:
			msgs = append(msgs, op)
		}
	}

	if len(msgs) > 0 {
		if b.Handle == nil {
			return applied, fmt.Errorf("%d message ops and no Handle", len(msgs))
		}
		t := &handlerTx{s: s, tx: tx, now: now, source: b.Source, unit: b.Unit, position: b.Ops[len(b.Ops)-1].Position}
		herr := b.Handle(hctx, t, msgs)
		t.finish()
		if herr != nil {
			return applied, handlerError{herr}
		}
		applied.Handled = len(msgs)
	}

	if b.Checkpoint != "" || b.Finished {
		if err = s.moveCheckpoint(ctx, tx, b, now); err != nil {
			return applied, err
		}
	}
	if b.SeekDone != 0 {
		if _, err = tx.ExecContext(ctx, `UPDATE drover_controls SET seek_done_id = ? WHERE source = ? AND unit = ?`,
			b.SeekDone, b.Source, b.Unit); err != nil {
			return applied, fmt.Errorf("seek done: %w", dbErr(err))
		}
	}
	return applied, nil
}

// dedupe drops the ops whose message id the source applied before (or that
// repeat an id of this batch), records the new ids and returns the rest.
func (s *Store) dedupe(ctx context.Context, tx *sql.Tx, b *persistence.Batch, now int64, applied *persistence.Applied) ([]persistence.Op, error) {
	var ids []string
	for _, op := range b.Ops {
		if op.MessageID != "" {
			ids = append(ids, op.MessageID)
		}
	}
	if len(ids) == 0 {
		return b.Ops, nil
	}
	idsJSON, err := json.Marshal(ids)
	if err != nil {
		return nil, fmt.Errorf("dedupe: %w", err)
	}
	seen := make(map[string]bool, len(ids))
	rows, err := tx.StmtContext(ctx, s.stmts.dedupeGet).QueryContext(ctx, b.Source, string(idsJSON))
	if err != nil {
		return nil, fmt.Errorf("dedupe: %w", dbErr(err))
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, fmt.Errorf("dedupe: %w", dbErr(err))
		}
		seen[id] = true
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return nil, fmt.Errorf("dedupe: %w", dbErr(err))
	}
	rows.Close()

	fresh := make([]persistence.Op, 0, len(b.Ops))
	var newIDs []string
	for _, op := range b.Ops {
		if id := op.MessageID; id != "" {
			if seen[id] {
				applied.Duplicates = append(applied.Duplicates, id)
				continue
			}
			seen[id] = true
			newIDs = append(newIDs, id)
		}
		fresh = append(fresh, op)
	}
	if len(newIDs) > 0 {
		newJSON, err := json.Marshal(newIDs)
		if err != nil {
			return nil, fmt.Errorf("dedupe: %w", err)
		}
		if _, err := tx.StmtContext(ctx, s.stmts.dedupePut).ExecContext(ctx, b.Source, now, string(newJSON)); err != nil {
			return nil, fmt.Errorf("dedupe: %w", dbErr(err))
		}
		if err := s.wrote(); err != nil {
			return nil, err
		}
	}
	return fresh, nil
}

// writeRecords writes folded upserts and deletes. The upsert leaves a
// stored document that equals the new one (as jsonb would compare them)
// unwritten: its DO UPDATE is conditional on sameJSONFunc, which compares
// the two texts in Go inside the statement, so no document is read back
// first: the rows of an upsert statement it did not change are unchanged
// documents. A batch's upserts share statements (recordWriter).
func (s *Store) writeRecords(ctx context.Context, tx *sql.Tx, table *tableStmts, b *persistence.Batch, ops []persistence.Op, now int64, applied *persistence.Applied) error {
	if len(ops) == 0 {
		return nil
	}
	w := recordWriter{s: s, ctx: ctx, tx: tx, table: table, b: b, applied: applied, args: make([]any, 0, 6*min(len(ops), upsertRows[0]))}
	// ops are folded (one per key), so their order does not matter: a
	// delete runs as it comes, beside upserts not written yet.
	for _, op := range ops {
		if op.Kind == persistence.OpDelete {
			if err := w.delete(op.Key); err != nil {
				return err
			}
			continue
		}
		doc := op.Doc
		if !op.DocChecked {
			var err error
			if doc, err = compactJSON(op.Doc); err != nil {
				return fmt.Errorf("upsert %s/%s: %w", b.Table, op.Key, persistence.Refused(err))
			}
		}
		w.args = append(w.args, op.Key, string(doc), b.Source, b.Unit, op.Position, now)
		w.bytes += len(doc)
		if len(w.args) == 6*upsertRows[0] || w.bytes >= upsertBytes {
			if err := w.flush(); err != nil {
				return err
			}
		}
	}
	return w.flush()
}

// upsertBytes bounds the documents one flush holds (as copies for the
// statement's arguments), so that a batch of large documents does not
// hold 64 more copies of them at once.
const upsertBytes = 1 << 20

// recordWriter writes one batch's records: its upserts collected (args,
// six per row) and written by as few statements as upsertRows allows.
type recordWriter struct {
	s       *Store
	ctx     context.Context
	tx      *sql.Tx
	table   *tableStmts
	b       *persistence.Batch
	applied *persistence.Applied
	args    []any
	bytes   int                        // of the documents in args
	upserts [len(upsertRows)]*sql.Stmt // the table's, in tx, as used
	remove  *sql.Stmt
}

// flush writes the collected upserts: the largest statement that fits
// what is left, until nothing is.
func (w *recordWriter) flush() error {
	args := w.args
	for i := 0; len(args) > 0; {
		n := upsertRows[i]
		if 6*n > len(args) {
			i++
			continue
		}
		if w.upserts[i] == nil {
			w.upserts[i] = w.tx.StmtContext(w.ctx, w.table.upserts[i])
		}
		res, err := w.upserts[i].ExecContext(w.ctx, args[:6*n]...)
		var changed int64
		if err == nil {
			changed, err = res.RowsAffected()
		}
		if err != nil {
			return fmt.Errorf("upsert %s: %w", w.rows(args[:6*n]), dbErr(err))
		}
		for range changed {
			if err := w.s.wrote(); err != nil {
				return err
			}
		}
		w.applied.Upserted += int(changed)
		w.applied.Unchanged += n - int(changed)
		args = args[6*n:]
	}
	w.args, w.bytes = w.args[:0], 0
	return nil
}

// rows names the rows of a statement's args: table/key for one, the
// first and last key and the count for more.
func (w *recordWriter) rows(args []any) string {
	if n := len(args) / 6; n > 1 {
		return fmt.Sprintf("%s/%v … %s/%v (%d rows)", w.b.Table, args[0], w.b.Table, args[len(args)-6], n)
	}
	return fmt.Sprintf("%s/%v", w.b.Table, args[0])
}

func (w *recordWriter) delete(key string) error {
	if w.remove == nil {
		w.remove = w.tx.StmtContext(w.ctx, w.table.remove)
	}
	if _, err := w.remove.ExecContext(w.ctx, key); err != nil {
		return fmt.Errorf("delete %s/%s: %w", w.b.Table, key, dbErr(err))
	}
	if err := w.s.wrote(); err != nil {
		return err
	}
	w.applied.Deleted++
	return nil
}

// compactJSON is doc, valid JSON, without the whitespace between its
// tokens: the text SQLite's json() stores for it, which the upsert once
// computed (at a cost of about a tenth of a group commit's CPU). A text
// with no space, tab or line break at all is compact as it is (whitespace
// inside a JSON string can only be a space).
func compactJSON(doc []byte) ([]byte, error) {
	if bytes.IndexAny(doc, " \t\r\n") < 0 {
		return doc, nil
	}
	var buf bytes.Buffer
	buf.Grow(len(doc))
	if err := json.Compact(&buf, doc); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// moveCheckpoint writes the batch's checkpoint when it is after the stored
// one, or marks the stored position finished; with Reset it writes it
// whatever the stored one is, Finished as the batch says.
func (s *Store) moveCheckpoint(ctx context.Context, tx *sql.Tx, b *persistence.Batch, now int64) error {
	if b.Reset {
		if _, err := tx.StmtContext(ctx, s.stmts.checkpointReset).ExecContext(ctx, b.Unit, b.Source, b.Checkpoint, b.Finished, b.Lease.Token, now, b.StreamID); err != nil {
			return fmt.Errorf("checkpoint: %w", dbErr(err))
		}
		return s.wrote()
	}
	if b.Checkpoint != "" {
		// One statement: the upsert moves it only forward (checkpointMove),
		// and a second one only when it moved nothing: the stored one is
		// not before it, or is another source's (checkpointMoveSource).
		args := []any{b.Unit, b.Source, b.Checkpoint, b.Finished, b.Lease.Token, now}
		for _, st := range []*sql.Stmt{s.stmts.checkpointMove, s.stmts.checkpointMoveSource} {
			res, err := tx.StmtContext(ctx, st).ExecContext(ctx, args...)
			if err != nil {
				return fmt.Errorf("checkpoint: %w", dbErr(err))
			}
			if n, err := res.RowsAffected(); err != nil {
				return fmt.Errorf("checkpoint: %w", dbErr(err))
			} else if n > 0 {
				return s.wrote()
			}
		}
		return nil // not after the stored one
	}
	// Finished without a position (the caller comes here only with one of
	// the two): the stored position, marked finished unless it is.
	var cur string
	var finished bool
	err := tx.StmtContext(ctx, s.stmts.checkpointGet).QueryRowContext(ctx, b.Unit).Scan(&cur, &finished)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return fmt.Errorf("checkpoint: %w", dbErr(err))
	case finished:
		return nil
	}
	if _, err := tx.StmtContext(ctx, s.stmts.checkpointPut).ExecContext(ctx, b.Unit, b.Source, cur, true, b.Lease.Token, now); err != nil {
		return fmt.Errorf("checkpoint: %w", dbErr(err))
	}
	return s.wrote()
}

// handlerTx is the persistence.Tx of a handler: it writes through the
// batch's SQL transaction. Its mutex lets a handler use it from several
// goroutines and makes calls after Handle returned fail.
type handlerTx struct {
	s                      *Store
	tx                     *sql.Tx
	now                    int64
	source, unit, position string

	mu   sync.Mutex
	done bool
}

var _ persistence.Tx = (*handlerTx)(nil)

func (t *handlerTx) finish() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.done = true
}

// begin locks t and checks that the transaction is still open and that
// table is valid. The caller unlocks.
func (t *handlerTx) begin(ctx context.Context, table string) error {
	t.mu.Lock()
	if t.done {
		return fmt.Errorf("transaction of %s: already finished", t.unit)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return persistence.ValidTable(table)
}

// ensure creates table inside the transaction when it is not known to
// exist (it then disappears again if the batch rolls back).
func (t *handlerTx) ensure(ctx context.Context, table string) error {
	if t.s.knownTable(table) != nil {
		return nil
	}
	if _, err := t.tx.ExecContext(ctx, recordsTableSQL(table)); err != nil {
		return fmt.Errorf("create table %s: %w", table, dbErr(err))
	}
	return nil
}

// stmt runs one of a table's statements: the prepared one when the table is
// known, else its text.
func (t *handlerTx) stmt(ctx context.Context, table string, pick func(*tableStmts) *sql.Stmt, text func(up, rm, get string) string) (*sql.Stmt, string) {
	if ts := t.s.knownTable(table); ts != nil {
		return t.tx.StmtContext(ctx, pick(ts)), ""
	}
	up, rm, get, _ := recordsSQL(table)
	return nil, text(up, rm, get)
}

func (t *handlerTx) get(ctx context.Context, table, key string) ([]byte, bool, error) {
	st, text := t.stmt(ctx, table, func(ts *tableStmts) *sql.Stmt { return ts.get }, func(_, _, get string) string { return get })
	var row *sql.Row
	if st != nil {
		row = st.QueryRowContext(ctx, key)
	} else {
		row = t.tx.QueryRowContext(ctx, text, key)
	}
	var doc []byte
	err := row.Scan(&doc)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, dbErr(err)
	}
	return doc, true, nil
}

// Put implements persistence.Tx.
func (t *handlerTx) Put(ctx context.Context, table, key string, doc []byte) error {
	defer t.mu.Unlock()
	if err := t.begin(ctx, table); err != nil {
		return fmt.Errorf("put %s/%s: %w", table, key, err)
	}
	if !json.Valid(doc) {
		return fmt.Errorf("put %s/%s: %w", table, key, persistence.Refused(errors.New("invalid JSON document")))
	}
	if err := t.ensure(ctx, table); err != nil {
		return fmt.Errorf("put %s/%s: %w", table, key, err)
	}
	old, ok, err := t.get(ctx, table, key)
	if err != nil {
		return fmt.Errorf("put %s/%s: %w", table, key, err)
	}
	if ok {
		if same, err := persistence.JSONEqual(old, doc); err == nil && same {
			return nil
		}
	}
	compact, err := compactJSON(doc)
	if err != nil {
		return fmt.Errorf("put %s/%s: %w", table, key, persistence.Refused(err))
	}
	st, text := t.stmt(ctx, table, (*tableStmts).upsertOne, func(up, _, _ string) string { return up })
	args := []any{key, string(compact), t.source, t.unit, t.position, t.now}
	if st != nil {
		_, err = st.ExecContext(ctx, args...)
	} else {
		_, err = t.tx.ExecContext(ctx, text, args...)
	}
	if err != nil {
		return fmt.Errorf("put %s/%s: %w", table, key, dbErr(err))
	}
	return nil
}

// Delete implements persistence.Tx.
func (t *handlerTx) Delete(ctx context.Context, table, key string) error {
	defer t.mu.Unlock()
	if err := t.begin(ctx, table); err != nil {
		return fmt.Errorf("delete %s/%s: %w", table, key, err)
	}
	if err := t.ensure(ctx, table); err != nil {
		return fmt.Errorf("delete %s/%s: %w", table, key, err)
	}
	st, text := t.stmt(ctx, table, func(ts *tableStmts) *sql.Stmt { return ts.remove }, func(_, rm, _ string) string { return rm })
	var err error
	if st != nil {
		_, err = st.ExecContext(ctx, key)
	} else {
		_, err = t.tx.ExecContext(ctx, text, key)
	}
	if err != nil {
		return fmt.Errorf("delete %s/%s: %w", table, key, dbErr(err))
	}
	return nil
}

// Get implements persistence.Tx.
func (t *handlerTx) Get(ctx context.Context, table, key string) ([]byte, bool, error) {
	defer t.mu.Unlock()
	if err := t.begin(ctx, table); err != nil {
		return nil, false, fmt.Errorf("get %s/%s: %w", table, key, err)
	}
	if err := t.ensure(ctx, table); err != nil {
		return nil, false, fmt.Errorf("get %s/%s: %w", table, key, err)
	}
	doc, ok, err := t.get(ctx, table, key)
	if err != nil {
		return nil, false, fmt.Errorf("get %s/%s: %w", table, key, err)
	}
	return doc, ok, nil
}

// Exec implements persistence.Tx: it runs sql in the batch's transaction.
func (t *handlerTx) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return 0, fmt.Errorf("exec: transaction of %s: already finished", t.unit)
	}
	res, err := t.tx.ExecContext(ctx, sql, args...)
	if err != nil {
		return 0, fmt.Errorf("exec: %w", dbErr(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("exec: %w", dbErr(err))
	}
	return n, nil
}

// Raw implements persistence.Tx: the *sql.Tx of the batch.
func (t *handlerTx) Raw() any { return t.tx }
