package sqs

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/drover-dev/drover/brokers/internal/awsutil"
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

// notFound are the codes of a missing queue.
var notFound = map[string]error{
	"QueueDoesNotExist":                       ErrQueueNotFound,
	"AWS.SimpleQueueService.NonExistentQueue": ErrQueueNotFound,
}

// translate turns an SDK error into a *brokers.Error.
func translate(op string, err error) error {
	return awsutil.Translate(op, err, nonRetryable, notFound)
}

// callError returns what a failed call reports: ctx.Err() when the
// caller's ctx ended, brokers.ErrClosed when the queue or receiver was
// closed during the call, else the translated error.
func callError(ctx, closing context.Context, op string, err error) error {
	return awsutil.CallError(ctx, closing, op, err, translate)
}
