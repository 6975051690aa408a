package sqs_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/awstest"
	"github.com/drover-dev/drover/brokers/brokertest"
)

// BenchmarkReceiveAck compares, in the same run, receiving and deleting
// messages through the adapter (Receive 10 + Ack) with the raw SDK client
// doing the same calls (ReceiveMessage 10 with all attributes +
// DeleteMessageBatch). Each iteration sends 500 messages per side (not
// timed) and drains them. Metrics: messages/s of each, and the adapter's
// share of the raw rate in percent.
func BenchmarkReceiveAck(b *testing.B) {
	ep := server.Endpoint(b)
	const n = 500
	f := harness{endpoint: ep}.newFixture(b, 30*time.Second)
	cfg := f.config()
	cfg.Endpoint = ep // no proxy: the same path as the raw client
	q := f.open(b, cfg)
	r, err := q.OpenReceiver(context.Background(), "slot-0")
	if err != nil {
		b.Fatal(err)
	}
	raw := awstest.SQSClient(ep, true)
	ctx := context.Background()
	body := make([]brokers.Message, n)
	for i := range body {
		body[i] = brokers.Message{Value: []byte(`{"id":` + strconv.Itoa(i) + `,"name":"benchmark message"}`)}
	}
	send := func() {
		b.StopTimer()
		if err := f.Send(ctx, body...); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	adapter := func() time.Duration {
		send()
		start := time.Now()
		brokertest.ReceiveAck(b, ctx, r, n, 10, 0)
		return time.Since(start)
	}
	rawSide := func() time.Duration {
		send()
		start := time.Now()
		for got := 0; got < n; {
			out, err := raw.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{
				QueueUrl: aws.String(f.url), MaxNumberOfMessages: 10,
				MessageAttributeNames:       []string{"All"},
				MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
			})
			if err != nil {
				b.Fatal(err)
			}
			if len(out.Messages) > 0 {
				entries := make([]sqstypes.DeleteMessageBatchRequestEntry, len(out.Messages))
				for i, m := range out.Messages {
					entries[i] = sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle}
				}
				if _, err := raw.DeleteMessageBatch(ctx, &awssqs.DeleteMessageBatchInput{QueueUrl: aws.String(f.url), Entries: entries}); err != nil {
					b.Fatal(err)
				}
			}
			got += len(out.Messages)
		}
		return time.Since(start)
	}
	awstest.Compare(b, n, "msg", adapter, rawSide)
}
