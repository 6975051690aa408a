// Package sqs reads an Amazon SQS queue as a brokers.Queue, on
// aws-sdk-go-v2 (which speaks the AWS JSON 1.0 protocol).
//
// # Messages
//
// A received message becomes a brokers.Message with:
//
//   - ID and Position: the SQS MessageId, which survives redelivery; it is
//     drover's dedupe id.
//   - Key: the value of the message attribute Config.KeyAttribute ("key");
//     without it, the MessageGroupId on a FIFO queue; else nil.
//   - Value: the body. Headers: the message attributes sorted by name
//     (String and Number values as text, Binary as bytes), then, on FIFO
//     queues, HeaderGroupID, HeaderDeduplicationID and HeaderSequenceNumber.
//   - Time: SentTimestamp. Deliveries: ApproximateReceiveCount.
//   - Handle: the receipt handle (for this package's Receiver only).
//
// # Receiving, acknowledging
//
// Receive calls ReceiveMessage for up to 10 messages with long polling
// (whole seconds, up to 20 s a call; the last fraction of a second of a
// wait is short-polled every 100 ms through exec.Wait). Every
// ReceiveMessage asks for Config.VisibilityTimeout (30 s when unset), so
// the queue's own VisibilityTimeout attribute, which may be shorter, never
// applies to what this package receives. A cancelled context aborts the
// HTTP request at once. Ack is DeleteMessageBatch in chunks of
// ten; an entry SQS refuses is reported per message in a *BatchError and
// the rest are deleted. Nack(delay) and Extend(d) are
// ChangeMessageVisibilityBatch with the visibility timeout rounded up to
// whole seconds. Result.Lag is -1 and Result.Oldest is not set, so a unit
// shows lag and lag_seconds -1: a receive tells neither a backlog nor an
// age; GetQueueAttributes' ApproximateNumberOfMessages counts the whole
// queue (not a slot) at a call per ask and lags by up to a minute, and
// ApproximateAgeOfOldestMessage is published only as a CloudWatch metric
// (which fauxqs does not serve either). Autoscale an SQS source on that
// metric (KEDA's aws-cloudwatch or aws-sqs-queue scalers).
//
// FIFO queues (name ending in ".fifo") keep each message group in order:
// SQS does not hand out a group's next message while an earlier one is in
// flight, whichever receiver holds it. Deduplication ids set by producers
// are honoured by SQS and shown in HeaderDeduplicationID. A FIFO Receive
// sends a ReceiveRequestAttemptId; when a receive does not come back
// (cancelled, connection lost) the next one repeats the id so SQS returns
// the same messages rather than leaving them, and their group, blocked
// until the visibility timeout.
//
// # Errors
//
// Every error from SQS is a *brokers.Error whose Err carries the SDK
// error's text but no SDK type; Retryable is false for client faults that
// will repeat (a missing queue, bad credentials, an invalid receipt
// handle) and true for throttling, server faults and lost connections.
// ErrQueueNotFound matches a missing queue with errors.Is.
//
// # Goroutines
//
// The package starts none of its own; the SDK's HTTP transport keeps idle
// connections, which Close closes after cancelling and waiting for every
// call in flight.
package sqs
