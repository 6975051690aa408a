package sqs

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/smithy-go"

	"github.com/drover-dev/drover/brokers"
)

// ErrQueueNotFound is returned (inside a *brokers.Error) when the queue
// does not exist.
var ErrQueueNotFound = errors.New("sqs: queue does not exist")

// BatchError reports the messages of one Ack, Nack or Extend that SQS did
// not accept (DeleteMessageBatch or ChangeMessageVisibilityBatch entries
// that failed, or whole requests that failed). The other messages of the
// call were handled. It is the Err of the *brokers.Error the call returns.
type BatchError struct {
	// Total is the number of distinct messages the call handled or tried.
	Total    int
	Failures []BatchFailure
}

// BatchFailure is one message SQS did not accept.
type BatchFailure struct {
	// MessageID is the message's SQS MessageId (brokers.Message.ID).
	MessageID string
	// Code is SQS's error code, e.g. "ReceiptHandleIsInvalid".
	Code    string
	Message string
	// SenderFault is SQS's word that the request was wrong, so retrying it
	// will not help.
	SenderFault bool
}

func (e *BatchError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d messages failed", len(e.Failures), e.Total)
	for i, f := range e.Failures {
		if i == 5 {
			fmt.Fprintf(&b, "; and %d more", len(e.Failures)-i)
			break
		}
		fmt.Fprintf(&b, "; %s: %s: %s", f.MessageID, f.Code, f.Message)
	}
	return b.String()
}

// retryable reports whether retrying some of the failures may help.
func (e *BatchError) retryable() bool {
	for _, f := range e.Failures {
		if !f.SenderFault {
			return true
		}
	}
	return false
}

// apiError is a client error flattened to its text and code, so that no
// SDK type escapes the package.
type apiError struct {
	code string
	msg  string
	is   error // a sentinel it matches, or nil
}

func (e *apiError) Error() string { return e.msg }
func (e *apiError) Unwrap() error { return e.is }

// nonRetryable lists client-fault codes that the same call will meet again.
var nonRetryable = map[string]bool{
	"AccessDenied":                                true,
	"AccessDeniedException":                       true,
	"AWS.SimpleQueueService.NonExistentQueue":     true,
	"QueueDoesNotExist":                           true,
	"InvalidAddress":                              true,
	"InvalidClientTokenId":                        true,
	"UnrecognizedClientException":                 true,
	"SignatureDoesNotMatch":                       true,
	"InvalidSecurity":                             true,
	"IncompleteSignature":                         true,
	"MissingAuthenticationToken":                  true,
	"InvalidParameterValue":                       true,
	"InvalidAttributeName":                        true,
	"InvalidAttributeValue":                       true,
	"ValidationError":                             true,
	"UnsupportedOperation":                        true,
	"AWS.SimpleQueueService.UnsupportedOperation": true,
	"ReceiptHandleIsInvalid":                      true,
	"InvalidIdFormat":                             true,
	"MessageNotInflight":                          true,
	"AWS.SimpleQueueService.MessageNotInflight":   true,
	"BatchEntryIdsNotDistinct":                    true,
	"TooManyEntriesInBatchRequest":                true,
	"EmptyBatchRequest":                           true,
	"InvalidBatchEntryId":                         true,
	"KmsAccessDenied":                             true,
	"KmsDisabled":                                 true,
	"KmsInvalidKeyUsage":                          true,
	"KmsInvalidState":                             true,
	"KmsNotFound":                                 true,
}

// translate turns an SDK error into a *brokers.Error.
func translate(op string, err error) error {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		// A connection refused or reset, a timeout: the next call may work.
		return &brokers.Error{Op: op, Retryable: true, Err: &apiError{msg: err.Error()}}
	}
	code := ae.ErrorCode()
	e := &apiError{code: code, msg: err.Error()}
	if code == "QueueDoesNotExist" || code == "AWS.SimpleQueueService.NonExistentQueue" {
		e.is = ErrQueueNotFound
	}
	retry := true
	if ae.ErrorFault() != smithy.FaultServer && nonRetryable[code] {
		retry = false
	}
	return &brokers.Error{Op: op, Retryable: retry, Err: e}
}

// callError returns what a failed call reports: ctx.Err() when the
// caller's ctx ended, brokers.ErrClosed when the queue or receiver was
// closed during the call, else the translated error.
func callError(ctx, closing context.Context, op string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	if closing.Err() != nil {
		return &brokers.Error{Op: op, Err: brokers.ErrClosed}
	}
	return translate(op, err)
}
