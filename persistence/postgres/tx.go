package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/drover-dev/drover/persistence"
)

// handlerTx is the persistence.Tx a batch's Handle writes through: the
// batch's own transaction. It may be used from one goroutine at a time
// (calls are serialised) and only until Handle returns.
type handlerTx struct {
	s                      *Store
	tx                     pgx.Tx
	source, unit, position string

	mu      sync.Mutex // guards done, created and the use of tx
	done    bool
	created map[string]*recordsSQL // records tables this transaction created
}

var _ persistence.Tx = (*handlerTx)(nil)

// finish closes the Tx to the handler and returns the tables it created,
// which exist once the transaction commits.
func (t *handlerTx) finish() map[string]*recordsSQL {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.done = true
	return t.created
}

// open is checked by every method with t.mu held.
func (t *handlerTx) open(table string) error {
	if t.done {
		return fmt.Errorf("transaction of %s: already finished", t.unit)
	}
	return persistence.ValidTable(table)
}

// table returns the statements of table, and whether the table exists as
// this transaction sees it. With create, a missing table is created in the
// transaction.
func (t *handlerTx) table(ctx context.Context, table string, create bool) (*recordsSQL, bool, error) {
	if r, ok := t.created[table]; ok {
		return r, true, nil
	}
	r, known := t.s.records(table)
	if known {
		return r, true, nil
	}
	if create {
		q := &pgx.Batch{}
		t.s.queueCreate(q, table, r)
		if err := sendBatch(ctx, t.tx, q, func(br pgx.BatchResults) error { return execN(br, 2) }); err != nil {
			return nil, false, err
		}
		if t.created == nil {
			t.created = make(map[string]*recordsSQL)
		}
		t.created[table] = r
		return r, true, nil
	}
	// Ask: a query on a missing table would abort the transaction.
	var exists bool
	if err := t.tx.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", r.table).Scan(&exists); err != nil {
		return nil, false, dbErr(err)
	}
	if exists {
		t.s.created(table, r) // committed by someone, since not by us
	}
	return r, exists, nil
}

// records checks that the Tx is open, then returns table's statements and
// whether it exists (see table).
func (t *handlerTx) records(ctx context.Context, table string, create bool) (*recordsSQL, bool, error) {
	if err := t.open(table); err != nil {
		return nil, false, err
	}
	return t.table(ctx, table, create)
}

// Put implements persistence.Tx. The record carries the batch's source,
// unit and last position.
func (t *handlerTx) Put(ctx context.Context, table, key string, doc []byte) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, _, err := t.records(ctx, table, true)
	if err != nil {
		return fmt.Errorf("put %s/%s: %w", table, key, err)
	}
	if _, err := t.tx.Exec(ctx, r.put, key, doc, t.source, t.unit, t.position); err != nil {
		return wrapf(err, "put %s/%s", table, key)
	}
	return nil
}

// Delete implements persistence.Tx.
func (t *handlerTx) Delete(ctx context.Context, table, key string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, exists, err := t.records(ctx, table, false)
	if err != nil {
		return fmt.Errorf("delete %s/%s: %w", table, key, err)
	}
	if !exists {
		return nil
	}
	if _, err := t.tx.Exec(ctx, r.del, key); err != nil {
		return wrapf(err, "delete %s/%s", table, key)
	}
	return nil
}

// Get implements persistence.Tx.
func (t *handlerTx) Get(ctx context.Context, table, key string) ([]byte, bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, exists, err := t.records(ctx, table, false)
	if err != nil {
		return nil, false, fmt.Errorf("get %s/%s: %w", table, key, err)
	}
	if !exists {
		return nil, false, nil
	}
	var doc []byte
	err = t.tx.QueryRow(ctx, r.get, key).Scan(&doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, wrapf(err, "get %s/%s", table, key)
	}
	return doc, true, nil
}

// Exec implements persistence.Tx: it runs sql in the batch's transaction.
// Names in sql are resolved by the connection's search_path, not by
// Config.Schema. An error aborts the transaction: the batch then fails.
func (t *handlerTx) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return 0, fmt.Errorf("exec: transaction of %s: already finished", t.unit)
	}
	tag, err := t.tx.Exec(ctx, sql, args...)
	if err != nil {
		return 0, wrapf(err, "exec")
	}
	return tag.RowsAffected(), nil
}

// Raw implements persistence.Tx: it returns the pgx.Tx of the batch. Its
// use is not serialised with the other methods.
func (t *handlerTx) Raw() any { return t.tx }
