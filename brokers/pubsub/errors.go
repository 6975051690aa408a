package pubsub

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/internal/lifetime"
)

// translate turns a client or gRPC error into a *brokers.Error that carries
// the code and message but none of the client's types.
func translate(op string, err error) error {
	return lifetime.Translate(op, err, func(op string, err error) error {
		if st, ok := status.FromError(err); ok && st.Code() != codes.Unknown {
			return &brokers.Error{Op: op, Retryable: retryableCode(st.Code()), Err: fmt.Errorf("%s: %s", st.Code(), st.Message())}
		}
		// Anything else (a dial failure, a call cut short by a timeout of
		// ours) may go away.
		return &brokers.Error{Op: op, Retryable: true, Err: errors.New(err.Error())}
	})
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
