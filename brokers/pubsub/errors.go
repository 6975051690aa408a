package pubsub

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/drover-dev/drover/brokers"
)

// life is the lifetime of a Queue or Receiver: a context cancelled when it
// closes. A call runs under op(ctx), which ends with the caller's ctx or
// the close, and maps its error with finish.
type life struct {
	ctx    context.Context
	cancel context.CancelFunc
}

func newLife(parent context.Context) life {
	ctx, cancel := context.WithCancel(parent)
	return life{ctx, cancel}
}

func (l life) closed() bool { return l.ctx.Err() != nil }

// op returns a context for one call: it ends when ctx ends or l closes.
func (l life) op(ctx context.Context) (context.Context, context.CancelFunc) {
	octx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(l.ctx, cancel)
	return octx, func() {
		stop()
		cancel()
	}
}

// finish maps the error of a call that ran under op: ErrClosed when the
// close ended it, the caller's ctx.Err() when the caller did, else err
// translated.
func (l life) finish(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if l.closed() {
		return closedErr(op)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return translate(op, err)
}

func closedErr(op string) error {
	return &brokers.Error{Op: op, Err: brokers.ErrClosed}
}

// translate turns a client or gRPC error into a *brokers.Error that carries
// the code and message but none of the client's types.
func translate(op string, err error) error {
	if err == nil {
		return nil
	}
	var be *brokers.Error
	if errors.As(err, &be) {
		return err
	}
	if st, ok := status.FromError(err); ok && st.Code() != codes.Unknown {
		return &brokers.Error{Op: op, Retryable: retryableCode(st.Code()), Err: fmt.Errorf("%s: %s", st.Code(), st.Message())}
	}
	// Anything else (a dial failure, a call cut short by a timeout of
	// ours) may go away.
	return &brokers.Error{Op: op, Retryable: true, Err: errors.New(err.Error())}
}

// retryableCode says whether an RPC that failed with c may succeed later.
func retryableCode(c codes.Code) bool {
	switch c {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted,
		codes.Aborted, codes.Internal, codes.Canceled, codes.Unknown:
		return true
	}
	// NotFound (subscription), PermissionDenied, Unauthenticated,
	// InvalidArgument, FailedPrecondition, ...: a configuration problem.
	return false
}
