package postgres

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/drover-dev/drover/persistence"
)

// Issue 10 item 7: the SQLSTATE classes that refuse what a batch holds are
// permanent; the others, which may pass on a retry, are not.
func TestErrorClasses(t *testing.T) {
	tests := []struct {
		code      string
		permanent bool
	}{
		{"22P02", true},  // invalid_text_representation (bad jsonb)
		{"22003", true},  // numeric_value_out_of_range
		{"22021", true},  // character_not_in_repertoire
		{"23514", true},  // check_violation
		{"23505", true},  // unique_violation
		{"23502", true},  // not_null_violation
		{"23503", true},  // foreign_key_violation
		{"42601", true},  // syntax_error
		{"42602", true},  // invalid_name
		{"42703", false}, // undefined_column: an ALTER TABLE; the operator fixes it
		{"42804", false}, // datatype_mismatch: likewise
		{"42883", false}, // undefined_function
		{"42P07", false}, // duplicate_table: concurrent CREATE TABLE
		{"42710", false}, // duplicate_object
		{"54000", true},  // program_limit_exceeded
		{"42501", false}, // insufficient_privilege: a GRANT fixes it
		{"42P01", false}, // undefined_table: the store creates it again
		{"08006", false}, // connection_failure
		{"08P01", false}, // protocol_violation
		{"40001", false}, // serialization_failure
		{"40P01", false}, // deadlock_detected
		{"53300", false}, // too_many_connections
		{"57014", false}, // query_canceled (statement_timeout)
		{"57P01", false}, // admin_shutdown
		{"55P03", false}, // lock_not_available
		{"25P02", false}, // in_failed_sql_transaction
		{"XX000", false}, // internal_error
		{"P0001", false}, // raise_exception
		{"DR001", false}, // drover_fence: lease lost
		{"", false},
	}
	for _, tt := range tests {
		err := fmt.Errorf("apply orders/0: upsert into orders: %w", &Error{Code: tt.code, Message: "m"})
		if got := errors.Is(err, persistence.ErrPermanent); got != tt.permanent {
			t.Errorf("SQLSTATE %q: permanent %v, want %v", tt.code, got, tt.permanent)
		}
		if got := persistence.Permanent(err); got != tt.permanent {
			t.Errorf("SQLSTATE %q: persistence.Permanent %v, want %v", tt.code, got, tt.permanent)
		}
		if busy := errors.Is(err, persistence.ErrBusy); busy != (tt.code == "55P03") {
			t.Errorf("SQLSTATE %q: busy %v", tt.code, busy)
		}
	}
	// a unique violation on a catalog's index is a race of concurrent DDL
	for _, c := range []struct {
		schema, constraint string
		permanent          bool
	}{
		{"pg_catalog", "pg_type_typname_nsp_index", false},
		{"pg_catalog", "pg_class_relname_nsp_index", false},
		{"public", "orders_pkey", true},
		{"public", "pg_y_unique", true}, // a user's constraint may be named pg_…
		{"", "", true},
	} {
		err := fmt.Errorf("apply: %w", &Error{Code: "23505", Message: "duplicate key value violates unique constraint", Constraint: c.constraint, Schema: c.schema})
		if got := persistence.Permanent(err); got != c.permanent {
			t.Errorf("23505 on %s.%s: permanent %v, want %v", c.schema, c.constraint, got, c.permanent)
		}
	}
	if persistence.Permanent(&driverError{msg: "connection refused"}) {
		t.Error("a driver error (connection refused) is permanent")
	}
}

// The refusal the chaos run met: transactions that each run CREATE TABLE
// IF NOT EXISTS on a table none of them sees yet all wait for the first;
// when it commits, the others fail (a unique violation on pg_type's index,
// or duplicate_table). That refusal is gone on the next try, so it must
// not count as permanent, or the records of those batches would be
// dead-lettered. On the real server.
func TestConcurrentCreateTableIsNotPermanent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const others = 4
	pcfg, err := pgxpool.ParseConfig(pg.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	pcfg.MaxConns = others + 2 // the first, the others and the watcher
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	const ddl = `CREATE TABLE IF NOT EXISTS race_audit (source text NOT NULL, position text NOT NULL)`
	first, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = first.Rollback(context.Background()) }() // a no-op once committed
	if _, err := first.Exec(ctx, ddl); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, others)
	for range others {
		go func() {
			tx, err := pool.Begin(ctx)
			if err != nil {
				errs <- err
				return
			}
			defer func() { _ = tx.Rollback(context.Background()) }()
			_, err = tx.Exec(ctx, ddl) // waits for first
			if err == nil {
				err = tx.Commit(ctx)
			}
			errs <- err
		}()
	}
	// every other transaction waits on the first one's catalog rows
	for {
		var waiting int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'CREATE TABLE IF NOT EXISTS race_audit%' AND datname = current_database()`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting == others {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d of %d transactions wait for the first: %v", waiting, others, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := first.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	refused := 0
	for range others {
		err := dbErr(<-errs)
		if err == nil {
			continue
		}
		refused++
		var pe *Error
		if !errors.As(err, &pe) {
			t.Fatalf("not a server error: %v", err)
		}
		if persistence.Permanent(err) {
			t.Errorf("concurrent CREATE TABLE IF NOT EXISTS refused as permanent: %v (constraint %q)", err, pe.Constraint)
		} else {
			t.Logf("refused, not permanent: %v (constraint %q)", err, pe.Constraint)
		}
	}
	if refused == 0 {
		t.Fatal("no transaction was refused: the race was not reproduced")
	}
}

// A user's constraint may be named pg_…: its violation is the data's, and
// stays permanent (only a violation on the system catalog is a race). On
// the real server.
func TestUserConstraintNamedPgIsPermanent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, pg.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `CREATE TABLE pgnamed (n int CONSTRAINT pg_n_positive CHECK (n > 0), k int CONSTRAINT pg_k_unique UNIQUE)`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO pgnamed VALUES (1, 1)`); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{`INSERT INTO pgnamed VALUES (-1, 2)`, `INSERT INTO pgnamed VALUES (2, 1)`} {
		_, err := pool.Exec(ctx, stmt)
		err = dbErr(err)
		var pe *Error
		if !errors.As(err, &pe) {
			t.Fatalf("%s: not a server error: %v", stmt, err)
		}
		if !persistence.Permanent(err) {
			t.Errorf("%s: %v (constraint %q, schema %q) is not permanent", stmt, err, pe.Constraint, pe.Schema)
		}
	}
}
