package brokers

import (
	"errors"
	"fmt"
)

var (
	// ErrClosed is returned by calls on a closed stream, reader, queue or
	// receiver.
	ErrClosed = errors.New("broker: closed")
	// ErrUnknownPartition is returned by Open for a partition the stream
	// does not have.
	ErrUnknownPartition = errors.New("broker: unknown partition")
	// ErrPositionGone is returned by Open or Fetch when the position to read
	// after is no longer held by the broker (retention or trimming deleted
	// it). Messages were lost before drover could read them.
	ErrPositionGone = errors.New("broker: position no longer available")
	// ErrPositionUnknown is returned by Open or Fetch when the position to
	// read after is not one of the partition's: it lies beyond the
	// partition's end, or came from an earlier incarnation of it (a topic or
	// stream deleted and created again, an unclean leader election). The
	// broker may reuse such positions for new messages, so reading on after
	// them would silently drop those. Not retryable: the position must be
	// reset (on_position_reset).
	ErrPositionUnknown = errors.New("broker: position unknown to the partition")
	// ErrInjected is the default error of injected faults.
	ErrInjected = errors.New("broker: injected fault")
)

// Error is a broker failure with the operation that failed. Adapters wrap
// their client's errors in it so that callers see no client types.
type Error struct {
	Op        string // "fetch", "ack", "list partitions", ...
	Retryable bool   // the same call may succeed later (connection lost, throttled)
	Err       error
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %v", e.Op, e.Err) }
func (e *Error) Unwrap() error { return e.Err }

// Retryable reports whether err may go away on its own: a connection loss,
// throttling, a timeout. Errors that are not *Error are taken as retryable,
// except ErrClosed, ErrUnknownPartition, ErrPositionGone (deleted messages
// do not come back) and ErrPositionUnknown.
func Retryable(err error) bool {
	if err == nil {
		return false
	}
	var be *Error
	if errors.As(err, &be) {
		return be.Retryable
	}
	return !errors.Is(err, ErrClosed) && !errors.Is(err, ErrUnknownPartition) && !errors.Is(err, ErrPositionGone) &&
		!errors.Is(err, ErrPositionUnknown)
}
