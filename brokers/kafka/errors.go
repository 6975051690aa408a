package kafka

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/drover-dev/drover/brokers"
)

// translate turns a franz-go error into a *brokers.Error for op, so that no
// client type leaves the package: the client's error survives only as text,
// and the decision callers make (retry or not, which sentinel) is made here.
// The caller's own context errors are returned as they are.
func translate(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return ctx.Err()
	}
	var (
		ke       *kerr.Error
		dataLoss *kgo.ErrDataLoss
		unknown  x509.UnknownAuthorityError
		verify   *tls.CertificateVerificationError
		hostname x509.HostnameError
	)
	switch {
	case errors.Is(err, kgo.ErrClientClosed):
		return &brokers.Error{Op: op, Err: brokers.ErrClosed}
	case errors.As(err, &dataLoss):
		// The client found the log truncated below where it was reading
		// (an unclean leader election): the offsets it had are reused.
		return &brokers.Error{Op: op, Err: fmt.Errorf("%w: %s", brokers.ErrPositionUnknown, err)}
	case errors.Is(err, kerr.OffsetOutOfRange):
		// Which side of the log the offset fell off is decided by the
		// caller that knows the offset (Reader.positionError: below the
		// start is gone, beyond the end unknown); without it, gone.
		return &brokers.Error{Op: op, Err: fmt.Errorf("%w: %s", brokers.ErrPositionGone, err)}
	case errors.As(err, &ke):
		return &brokers.Error{Op: op, Retryable: ke.Retriable, Err: errors.New(err.Error())}
	case errors.As(err, &unknown), errors.As(err, &verify), errors.As(err, &hostname):
		return &brokers.Error{Op: op, Err: errors.New(err.Error())}
	case errors.Is(err, context.DeadlineExceeded):
		// Our own request timeout, not the caller's: the broker did not
		// answer in time.
		return &brokers.Error{Op: op, Retryable: true, Err: fmt.Errorf("no answer within the request timeout: %s", err)}
	}
	// Connection refused or reset, EOF, timeouts: the broker may come back.
	return &brokers.Error{Op: op, Retryable: true, Err: errors.New(err.Error())}
}
