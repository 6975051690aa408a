package kinesis

import (
	"context"
	"errors"

	"github.com/aws/smithy-go"

	"github.com/drover-dev/drover/brokers/internal/awsutil"
)

// ErrStreamNotFound is returned (inside a *brokers.Error) when the stream
// does not exist.
var ErrStreamNotFound = errors.New("kinesis: stream does not exist")

// Kinesis error codes the adapter acts on.
const (
	codeThroughput  = "ProvisionedThroughputExceededException"
	codeExpired     = "ExpiredIteratorException"
	codeNotFound    = "ResourceNotFoundException"
	codeLimit       = "LimitExceededException"
	codeInvalidArg  = "InvalidArgumentException"
	codeAccess      = "AccessDeniedException"
	codeKMSThrottle = "KMSThrottlingException"
)

// nonRetryable lists client-fault codes that the same call will meet again.
var nonRetryable = map[string]bool{
	codeNotFound:                  true,
	codeInvalidArg:                true,
	codeAccess:                    true,
	"ValidationException":         true,
	"UnrecognizedClientException": true,
	"InvalidSignatureException":   true,
	"IncompleteSignature":         true,
	"MissingAuthenticationToken":  true,
	"SignatureDoesNotMatch":       true,
	"KMSAccessDeniedException":    true,
	"KMSDisabledException":        true,
	"KMSInvalidStateException":    true,
	"KMSNotFoundException":        true,
	"KMSOptInRequired":            true,
	"ResourceInUseException":      true,
	"ExpiredNextTokenException":   true,
	"InvalidClientTokenId":        true,
	"AccessDenied":                true,
}

// codeOf is the API error code of err, or "".
func codeOf(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// apiMessage is the message of an API error (without the SDK's operation
// and request id), or the error's whole text.
func apiMessage(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorMessage() != "" {
		return ae.ErrorCode() + ": " + ae.ErrorMessage()
	}
	return err.Error()
}

// translate turns an SDK error into a *brokers.Error.
func translate(op string, err error) error {
	return awsutil.Translate(op, err, nonRetryable, nil)
}

// callError returns what a failed call reports: ctx.Err() when the
// caller's ctx ended, brokers.ErrClosed when the stream or reader was
// closed during the call, else the translated error.
func callError(ctx, closing context.Context, op string, err error) error {
	return awsutil.CallError(ctx, closing, op, err, translate)
}
