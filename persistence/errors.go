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
)

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
