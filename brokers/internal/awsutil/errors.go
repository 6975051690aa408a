package awsutil

import (
	"context"
	"errors"

	"github.com/aws/smithy-go"

	"github.com/drover-dev/drover/brokers"
)

// APIError is an SDK error flattened to its text and code, so that no SDK
// type escapes an adapter.
type APIError struct {
	Code string // the API error code, "" for a transport error
	Msg  string
	Is   error // a sentinel it matches, or nil
}

func (e *APIError) Error() string { return e.Msg }
func (e *APIError) Unwrap() error { return e.Is }

// Translate turns an SDK error into a *brokers.Error wrapping an
// *APIError. An error that is no API error (a connection refused or reset,
// a timeout) is retryable: the next call may work. An API error is
// retryable unless it is a client fault whose code nonRetryable lists; the
// sentinel sentinels names for its code is what it matches.
func Translate(op string, err error, nonRetryable map[string]bool, sentinels map[string]error) error {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return &brokers.Error{Op: op, Retryable: true, Err: &APIError{Msg: err.Error()}}
	}
	code := ae.ErrorCode()
	e := &APIError{Code: code, Msg: err.Error(), Is: sentinels[code]}
	retry := ae.ErrorFault() == smithy.FaultServer || !nonRetryable[code]
	return &brokers.Error{Op: op, Retryable: retry, Err: e}
}

// CallError returns what a failed call reports: ctx.Err() when the
// caller's ctx ended, brokers.ErrClosed when closing (the adapter's own
// lifetime) ended during the call, else translate's error.
func CallError(ctx, closing context.Context, op string, err error, translate func(op string, err error) error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	if closing.Err() != nil {
		return &brokers.Error{Op: op, Err: brokers.ErrClosed}
	}
	return translate(op, err)
}
