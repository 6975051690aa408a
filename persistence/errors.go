package persistence

import (
	"errors"
	"fmt"
	"time"
)

var (
	// ErrLeaseLost: the caller's token is no longer the unit's token (a
	// newer owner took the unit). Nothing was written.
	ErrLeaseLost = errors.New("lease lost")
	// ErrSeekDone: a batch's SeekDone names a seek its control row marks
	// done already (carried out, refused, expired or overtaken). Nothing
	// of the batch was written.
	ErrSeekDone = errors.New("seek done already")
	// ErrLeaseHeld: Acquire found the lease held by a live owner.
	ErrLeaseHeld = errors.New("lease held by another owner")
	// ErrNotFound: no such checkpoint or dead letter.
	ErrNotFound = errors.New("not found")
	// ErrSchemaTooNew: the database was migrated by a newer drover.
	ErrSchemaTooNew = errors.New("database schema is newer than this drover")
	// ErrUnsupported: the store cannot do this (Exec on the memory store).
	ErrUnsupported = errors.New("not supported by this store")
	// ErrBusy: the call waited for a lock another transaction holds (a
	// lease row locked by an apply, or by the transaction of a node that
	// vanished until the database cuts it off) and gave up. Try again
	// soon; it is not a failure of the caller.
	ErrBusy = errors.New("store: locked by another transaction")
	// ErrInjected is the default error of injected faults.
	ErrInjected = errors.New("store: injected fault")
	// ErrPermanent: the store refused what the batch holds and will refuse
	// it again however often it is applied — a constraint a record
	// violates, a value of the wrong type or too large for its column, a
	// document that is not JSON. Nothing of the batch was written. The
	// runtime splits such a batch and dead-letters the records the store
	// refuses alone (actors, architecture §7); any other error of Apply is
	// transient: the same batch is retried and nothing is dead-lettered.
	// The stores' errors match it with errors.Is: PostgreSQL by SQLSTATE
	// class (22 data exception, 23 integrity constraint violation except
	// on the system catalog, 42 syntax error or access rule violation
	// except the codes that refuse the schema's state, 54 program limit
	// exceeded; see postgres.Error.Permanent), SQLite by result code (SQLITE_CONSTRAINT,
	// SQLITE_MISMATCH, SQLITE_TOOBIG), and Refused errors of every store.
	ErrPermanent = errors.New("store: refused permanently")
)

// Permanent reports whether err says the store refused a batch for what
// it holds (errors.Is(err, ErrPermanent)): applying it again would fail
// again.
func Permanent(err error) bool { return errors.Is(err, ErrPermanent) }

// RefusedError marks a store's own check that refuses a batch for what it
// holds (an upsert that is not a JSON object, say) as permanent. Its text
// is Err's.
type RefusedError struct{ Err error }

// Refused wraps err as a RefusedError; nil stays nil.
func Refused(err error) error {
	if err == nil {
		return nil
	}
	return &RefusedError{Err: err}
}

func (e *RefusedError) Error() string { return e.Err.Error() }
func (e *RefusedError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrPermanent) true.
func (e *RefusedError) Is(target error) bool { return target == ErrPermanent }

// LeaseHeldError says who holds a lease Acquire could not take.
type LeaseHeldError struct {
	Holder Lease
}

func (e *LeaseHeldError) Error() string {
	return fmt.Sprintf("lease of %s held by %s (token %d) until %s",
		e.Holder.Unit, e.Holder.Owner, e.Holder.Token, e.Holder.ExpiresAt.UTC().Format(time.RFC3339Nano))
}

// Is makes errors.Is(err, ErrLeaseHeld) true.
func (e *LeaseHeldError) Is(target error) bool { return target == ErrLeaseHeld }
