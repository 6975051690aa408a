package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/drover-dev/drover/persistence"
)

// Error is an error PostgreSQL returned, translated from the driver's so
// that no pgx type leaves this package. Callers that write SQL through
// Tx.Exec can branch on Code.
type Error struct {
	Code    string // SQLSTATE, e.g. "23505" for a unique violation
	Message string
	Detail  string
	// Constraint names the constraint (or unique index) a class 23 error
	// is about, and Schema the schema of its table; empty when the server
	// did not say.
	Constraint string
	Schema     string
}

// Is makes a lock timeout (55P03, lock_not_available) match
// persistence.ErrBusy, and the errors Permanent names match
// persistence.ErrPermanent.
func (e *Error) Is(target error) bool {
	switch target {
	case persistence.ErrBusy:
		return e.Code == codeLockNotAvailable
	case persistence.ErrPermanent:
		return e.Permanent()
	}
	return false
}

// Permanent reports whether the server refused what the statement writes,
// so that the same batch fails again however often it is applied. By
// SQLSTATE class:
//
//	22 data exception                     (a value the column's type refuses: bad jsonb, out of range)
//	23 integrity constraint violation     (CHECK, NOT NULL, UNIQUE, FOREIGN KEY, EXCLUDE)
//	42 syntax error or access rule violation (a statement no record can make valid)
//	54 program limit exceeded             (a jsonb or index entry too large)
//
// except where the refusal is of the schema's state rather than of the
// data, which an operator or a concurrent transaction changes and the
// next try may not meet:
//
//   - 42501 insufficient_privilege (a GRANT fixes it), 42P01
//     undefined_table (the store creates a records table again at the next
//     apply), 42703 undefined_column, 42704 undefined_object, 42883
//     undefined_function, 42804 datatype_mismatch, 42809
//     wrong_object_type, 428C9 generated_always (an ALTER TABLE made the
//     table other than the statement expects: every record would be
//     refused alone and the whole stream dead-lettered), and the
//     duplicate_* objects 42701, 42710, 42723, 42P06, 42P07 (concurrent
//     CREATE … IF NOT EXISTS);
//   - a class 23 violation on a system catalog (schema pg_catalog; a
//     user's table is never there, whatever its constraints are named):
//     concurrent CREATE TABLE IF NOT EXISTS fails all but the first
//     transaction with a unique violation on pg_type_typname_nsp_index.
//
// Every other class is transient — among them 08 connection exception, 40
// transaction rollback (serialization failure, deadlock), 53 insufficient
// resources, 55 lock not available, 57 operator intervention (statement
// timeout, shutdown) — and so are errors that are not the server's.
func (e *Error) Permanent() bool {
	if len(e.Code) != 5 {
		return false
	}
	switch e.Code[:2] {
	case "22", "54":
		return true
	case "23":
		return e.Schema != "pg_catalog"
	case "42":
		return !schemaState[e.Code]
	}
	return false
}

// schemaState are the class 42 codes that refuse the schema's state, not
// the data (see Permanent).
var schemaState = map[string]bool{
	codeInsufficientPrivilege: true,
	codeUndefinedTable:        true,
	"42703":                   true, // undefined_column
	"42704":                   true, // undefined_object
	"42883":                   true, // undefined_function
	"42804":                   true, // datatype_mismatch
	"42809":                   true, // wrong_object_type
	"428C9":                   true, // generated_always
	"42701":                   true, // duplicate_column
	"42710":                   true, // duplicate_object
	"42723":                   true, // duplicate_function
	"42P06":                   true, // duplicate_schema
	"42P07":                   true, // duplicate_table
}

func (e *Error) Error() string {
	s := e.Message + " (SQLSTATE " + e.Code + ")"
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// SQLSTATE codes this package acts on.
const (
	codeUndefinedTable        = "42P01"
	codeInsufficientPrivilege = "42501"
	codeLockNotAvailable      = "55P03" // lock_timeout
	codeLeaseLost             = "DR001" // raised by drover_fence
	codeSeekDone              = "DR002" // raised by drover_seek_done
)

// driverError is any other driver failure (connection refused, broken
// pipe, closed pool) reduced to its text. It unwraps to the context's
// error when the failure came from a cancelled or expired context, so
// errors.Is(err, context.Canceled) still holds.
type driverError struct {
	msg string
	ctx error
}

func (e *driverError) Error() string { return e.msg }
func (e *driverError) Unwrap() error { return e.ctx }

// dbErr translates a driver error at the package boundary; nil stays nil.
// Errors of package persistence pass through unchanged.
func dbErr(err error) error {
	if err == nil {
		return nil
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return &Error{Code: pe.Code, Message: pe.Message, Detail: pe.Detail, Constraint: pe.ConstraintName, Schema: pe.SchemaName}
	}
	for _, ce := range []error{context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, ce) {
			return &driverError{msg: err.Error(), ctx: ce}
		}
	}
	return &driverError{msg: err.Error()}
}

// isCode reports whether err is a PostgreSQL error with this SQLSTATE.
func isCode(err error, code string) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == code
	}
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// wrapf wraps a driver error once, translated: "op: text".
func wrapf(err error, format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, dbErr(err))...)
}
