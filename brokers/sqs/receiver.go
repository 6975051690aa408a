package sqs

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/internal/awsutil"
	"github.com/drover-dev/drover/brokers/internal/lifetime"
	"github.com/drover-dev/drover/internal/exec"
)

// Header names of the FIFO system attributes a message carries. User
// message attributes may not start with "AWS.", so these never collide
// with them.
const (
	HeaderGroupID         = "AWS.SQS.MessageGroupId"
	HeaderDeduplicationID = "AWS.SQS.MessageDeduplicationId"
	HeaderSequenceNumber  = "AWS.SQS.SequenceNumber"
)

// shortPoll is the pause between polls when less than a second of a
// Receive's wait is left (SQS long polls only in whole seconds).
const shortPoll = 100 * time.Millisecond

// Receiver is one consumer slot of a Queue. It implements brokers.Receiver
// and brokers.Extender. A Receiver is used by one goroutine at a time;
// Close may come from another.
type Receiver struct {
	q    *Queue
	slot string
	// ctx is cancelled by Close (or the queue's Close).
	ctx    context.Context
	cancel context.CancelFunc
	// closed is guarded by q.mu.
	closed bool

	// attempt is the ReceiveRequestAttemptId of a FIFO receive that did
	// not come back (cancelled, failed); the next receive reuses it so that
	// SQS hands out the same messages instead of leaving them invisible.
	attempt string
}

var (
	_ brokers.Receiver = (*Receiver)(nil)
	_ brokers.Extender = (*Receiver)(nil)
)

// handle is brokers.Message.Handle of a received message.
type handle struct {
	q       *Queue
	receipt string
}

// Receive returns up to n messages (at most Config.MaxMessages, 10),
// waiting at most wait for the first. It long-polls in whole seconds (up to
// Config.WaitTime per call) and short-polls the last fraction of a second.
// A cancelled ctx ends it at once with ctx.Err(); Close ends it with
// brokers.ErrClosed. A long poll cancelled after SQS picked messages
// leaves them invisible until their visibility timeout; a FIFO receiver
// asks for them again with the same attempt id on its next Receive.
func (r *Receiver) Receive(ctx context.Context, n int, wait time.Duration) (brokers.Result, error) {
	if n <= 0 {
		return brokers.Result{}, &brokers.Error{Op: OpReceive, Err: fmt.Errorf("max %d must be positive", n)}
	}
	cctx, end, err := r.begin(ctx, OpReceive)
	if err != nil {
		return brokers.Result{}, err
	}
	defer end()
	q := r.q
	in := &awssqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(q.url),
		MaxNumberOfMessages:         int32(min(n, q.cfg.MaxMessages)),
		MessageAttributeNames:       []string{"All"},
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
	}
	// Always explicit (DefaultVisibilityTimeout when unset): the queue's
	// own attribute may be shorter than what the caller extends by.
	in.VisibilityTimeout = int32(ceilSeconds(q.cfg.VisibilityTimeout))
	start := time.Now()
	var paused time.Duration // waited through exec.Wait (counts under a virtual clock too)
	for {
		left := wait - max(time.Since(start), paused)
		in.WaitTimeSeconds = int32(min(max(left, 0), q.cfg.WaitTime) / time.Second)
		if q.fifo {
			if r.attempt == "" {
				r.attempt = newAttemptID()
			}
			in.ReceiveRequestAttemptId = aws.String(r.attempt)
		}
		out, err := q.client.ReceiveMessage(cctx, in)
		if err != nil {
			return brokers.Result{}, callError(ctx, r.ctx, OpReceive, err)
		}
		r.attempt = ""
		if len(out.Messages) > 0 {
			return brokers.Result{Messages: r.convert(out.Messages), Lag: -1}, nil
		}
		left = wait - max(time.Since(start), paused)
		if left <= 0 {
			return brokers.Result{Lag: -1}, nil
		}
		if in.WaitTimeSeconds == 0 {
			d := min(left, shortPoll)
			if err := exec.Wait(cctx, d, nil); err != nil {
				return brokers.Result{}, callError(ctx, r.ctx, OpReceive, err)
			}
			paused += d
		}
	}
}

func (r *Receiver) convert(in []sqstypes.Message) []brokers.Message {
	out := make([]brokers.Message, 0, len(in))
	key := r.q.cfg.KeyAttribute
	for _, sm := range in {
		// The dedupe id. SQS assigns every message sent a MessageId of its
		// own (a UUID), kept across redeliveries: the same body sent twice
		// is two messages with two ids, and a queue deleted and created
		// again under the same name does not reuse ids, so an id names one
		// message of the whole broker (TestMessageIDsUniquePerSend).
		id := aws.ToString(sm.MessageId)
		m := brokers.Message{
			ID:       id,
			Position: id,
			Value:    []byte(aws.ToString(sm.Body)),
			Handle:   handle{q: r.q, receipt: aws.ToString(sm.ReceiptHandle)},
		}
		if ms, err := strconv.ParseInt(sm.Attributes[string(sqstypes.MessageSystemAttributeNameSentTimestamp)], 10, 64); err == nil {
			m.Time = time.UnixMilli(ms)
		}
		if n, err := strconv.Atoi(sm.Attributes[string(sqstypes.MessageSystemAttributeNameApproximateReceiveCount)]); err == nil {
			m.Deliveries = n
		}
		names := make([]string, 0, len(sm.MessageAttributes))
		for name := range sm.MessageAttributes {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			v := attributeBytes(sm.MessageAttributes[name])
			m.Headers = append(m.Headers, brokers.Header{Key: name, Value: v})
			if name == key {
				m.Key = append([]byte(nil), v...)
			}
		}
		for _, sys := range []struct{ attr, header string }{
			{string(sqstypes.MessageSystemAttributeNameMessageGroupId), HeaderGroupID},
			{string(sqstypes.MessageSystemAttributeNameMessageDeduplicationId), HeaderDeduplicationID},
			{string(sqstypes.MessageSystemAttributeNameSequenceNumber), HeaderSequenceNumber},
		} {
			if v, ok := sm.Attributes[sys.attr]; ok && v != "" {
				m.Headers = append(m.Headers, brokers.Header{Key: sys.header, Value: []byte(v)})
			}
		}
		if m.Key == nil {
			if g := sm.Attributes[string(sqstypes.MessageSystemAttributeNameMessageGroupId)]; g != "" {
				m.Key = []byte(g)
			}
		}
		out = append(out, m)
	}
	return out
}

// attributeBytes is a message attribute's value: the string (String and
// Number types) or the bytes (Binary).
func attributeBytes(v sqstypes.MessageAttributeValue) []byte {
	if v.StringValue != nil {
		return []byte(*v.StringValue)
	}
	if v.BinaryValue != nil {
		return append([]byte{}, v.BinaryValue...)
	}
	return []byte{}
}

// target is one distinct message of an Ack, Nack or Extend.
type target struct {
	id      string
	receipt string
}

// targets checks that msgs came from this queue and drops repeats.
func (r *Receiver) targets(op string, msgs []brokers.Message) ([]target, error) {
	seen := make(map[string]bool, len(msgs))
	out := make([]target, 0, len(msgs))
	for _, m := range msgs {
		h, ok := m.Handle.(handle)
		if !ok || h.q != r.q {
			return nil, &brokers.Error{Op: op, Err: fmt.Errorf("message %q was not received from this queue", m.ID)}
		}
		if seen[h.receipt] {
			continue
		}
		seen[h.receipt] = true
		out = append(out, target{id: m.ID, receipt: h.receipt})
	}
	return out, nil
}

// Ack deletes msgs with DeleteMessageBatch, ten at a time. Messages SQS
// refuses (an expired receipt handle, for one) are reported together in a
// *BatchError inside the returned *brokers.Error; the others are deleted. A
// failed delete is harmless: the message comes back and drover's dedupe
// table refuses it.
func (r *Receiver) Ack(ctx context.Context, msgs []brokers.Message) error {
	ts, err := r.targets(OpAck, msgs)
	if err != nil || len(ts) == 0 {
		return err
	}
	return r.batch(ctx, OpAck, ts, func(cctx context.Context, chunk []target) ([]sqstypes.BatchResultErrorEntry, error) {
		entries := make([]sqstypes.DeleteMessageBatchRequestEntry, len(chunk))
		for i, t := range chunk {
			entries[i] = sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(t.receipt)}
		}
		out, err := r.q.client.DeleteMessageBatch(cctx, &awssqs.DeleteMessageBatchInput{QueueUrl: aws.String(r.q.url), Entries: entries})
		if err != nil {
			return nil, err
		}
		return out.Failed, nil
	})
}

// Nack makes msgs visible again after delay (ChangeMessageVisibilityBatch;
// whole seconds, rounded up, at most 12 h). On a FIFO queue the message's
// group stays blocked until then, which keeps the group's order.
func (r *Receiver) Nack(ctx context.Context, msgs []brokers.Message, delay time.Duration) error {
	return r.changeVisibility(ctx, OpNack, msgs, delay)
}

// Extend keeps msgs invisible for d from now (ChangeMessageVisibilityBatch;
// whole seconds, rounded up, at most 12 h).
func (r *Receiver) Extend(ctx context.Context, msgs []brokers.Message, d time.Duration) error {
	return r.changeVisibility(ctx, OpExtend, msgs, d)
}

func (r *Receiver) changeVisibility(ctx context.Context, op string, msgs []brokers.Message, d time.Duration) error {
	ts, err := r.targets(op, msgs)
	if err != nil || len(ts) == 0 {
		return err
	}
	secs := int32(min(ceilSeconds(max(d, 0)), int64(MaxVisibilityTimeout/time.Second)))
	return r.batch(ctx, op, ts, func(cctx context.Context, chunk []target) ([]sqstypes.BatchResultErrorEntry, error) {
		entries := make([]sqstypes.ChangeMessageVisibilityBatchRequestEntry, len(chunk))
		for i, t := range chunk {
			entries[i] = sqstypes.ChangeMessageVisibilityBatchRequestEntry{
				Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(t.receipt), VisibilityTimeout: secs,
			}
		}
		out, err := r.q.client.ChangeMessageVisibilityBatch(cctx, &awssqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(r.q.url), Entries: entries})
		if err != nil {
			return nil, err
		}
		return out.Failed, nil
	})
}

// batch runs call on chunks of ten targets and gathers the failures: the
// entries SQS refused, and every entry of a request that failed whole. It
// stops early only when ctx ends or the receiver closes.
func (r *Receiver) batch(ctx context.Context, op string, ts []target,
	call func(context.Context, []target) ([]sqstypes.BatchResultErrorEntry, error)) error {
	cctx, end, err := r.begin(ctx, op)
	if err != nil {
		return err
	}
	defer end()
	be := &BatchError{Total: len(ts)}
	retryable := false
	for start := 0; start < len(ts); start += 10 {
		chunk := ts[start:min(start+10, len(ts))]
		failed, err := call(cctx, chunk)
		if err != nil {
			err = callError(ctx, r.ctx, op, err)
			var bre *brokers.Error
			if !asBrokersError(err, &bre) || bre.Err == brokers.ErrClosed {
				return err // ctx ended or closed
			}
			retryable = retryable || bre.Retryable
			for _, t := range chunk {
				be.Failures = append(be.Failures, BatchFailure{MessageID: t.id, Code: codeOf(bre.Err), Message: bre.Err.Error(), SenderFault: !bre.Retryable})
			}
			continue
		}
		for _, f := range failed {
			i, err := strconv.Atoi(aws.ToString(f.Id))
			if err != nil || i < 0 || i >= len(chunk) {
				continue // SQS names only ids we sent
			}
			be.Failures = append(be.Failures, BatchFailure{
				MessageID: chunk[i].id, Code: aws.ToString(f.Code), Message: aws.ToString(f.Message), SenderFault: f.SenderFault,
			})
		}
	}
	if len(be.Failures) == 0 {
		return nil
	}
	return &brokers.Error{Op: op, Retryable: retryable || be.retryable(), Err: be}
}

// Close releases the receiver and cancels its calls in flight. Its
// unacknowledged messages come back after their visibility timeout.
// Closing twice is harmless.
func (r *Receiver) Close() error {
	lifetime.Shut(&r.q.mu, &r.closed)
	r.cancel()
	return nil
}

func ceilSeconds(d time.Duration) int64 {
	return int64(math.Ceil(d.Seconds()))
}

func asBrokersError(err error, target **brokers.Error) bool {
	be, ok := err.(*brokers.Error)
	if ok {
		*target = be
	}
	return ok
}

func codeOf(err error) string {
	if ae, ok := err.(*awsutil.APIError); ok && ae.Code != "" {
		return ae.Code
	}
	return "RequestFailed"
}
