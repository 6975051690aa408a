package node_test

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/awstest"
)

// e2eAWSSecretEnv carries the emulators' dummy secret key into the
// configs, the way a real one must come.
const e2eAWSSecretEnv = "DROVER_E2E_AWS_SECRET_ACCESS_KEY"

// Amazon SQS end to end on fauxqs: two standard queues fed the same
// messages, one per source (each queue gives its own message ids).
func TestE2ESQS(t *testing.T) {
	ep := e2eSQS.Endpoint(t)
	c := awstest.SQSClient(ep, true)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const visibility = 3 // seconds: node 1's unacked messages come back after it
	urls := map[string]string{}
	for _, q := range []string{"orders", "audit"} {
		name := fmt.Sprintf("drover-e2e-%d-%s", os.Getpid(), q)
		urls[q] = e2eSQSQueue(ctx, t, c, name, visibility)
	}
	msgs := e2eWorkload(t, 41, true, false)
	rec := &e2eSource{Name: "sqs-orders", Table: "sqs_orders", Queue: true, Slots: 2, Sent: e2eSendSQS(ctx, t, c, urls["orders"], msgs)}
	aud := &e2eSource{Name: "sqs-audit", Audit: true, Queue: true, Slots: 2, Sent: e2eSendSQS(ctx, t, c, urls["audit"], msgs)}

	t.Setenv(e2eAWSSecretEnv, awstest.SecretAccessKey)
	section := func(url string) string {
		return fmt.Sprintf("queue_url: %q\nregion: %s\nendpoint: %q\nwait: 1s\nvisibility_timeout: %ds\naccess_key_id: %s\nsecret_access_key: \"${env:%s}\"",
			url, awstest.Region, ep, visibility, awstest.AccessKeyID, e2eAWSSecretEnv)
	}
	res := runE2E(t, e2eRun{
		StoreURL:    e2eSQLiteURL(t),
		Sources:     []*e2eSource{rec, aud},
		SourcesYAML: rec.YAML("sqs", section(urls["orders"])) + aud.YAML("sqs", section(urls["audit"])),
		// Everything acked (deleted): no message waiting or in flight.
		Drained: func(ctx context.Context) (bool, string) {
			for q, url := range urls {
				visible, inFlight, err := e2eSQSCounts(ctx, c, url)
				if err != nil {
					return false, err.Error()
				}
				if visible != "0" || inFlight != "0" {
					return false, fmt.Sprintf("queue %s: %s messages waiting, %s in flight", q, visible, inFlight)
				}
			}
			return true, ""
		},
	})
	e2eNoSecret(t, res, awstest.SecretAccessKey)
}

// e2eSQSQueue creates queue name with a visibility timeout of the given
// seconds, deleted when the test ends, and returns its URL.
func e2eSQSQueue(ctx context.Context, t *testing.T, c *awssqs.Client, name string, visibility int) string {
	t.Helper()
	out, err := c.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String(name),
		Attributes: map[string]string{"VisibilityTimeout": strconv.Itoa(visibility)}})
	if err != nil {
		t.Fatalf("create queue %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if _, err := c.DeleteQueue(ctx, &awssqs.DeleteQueueInput{QueueUrl: out.QueueUrl}); err != nil {
			t.Logf("delete queue %s: %v", name, err)
		}
	})
	return aws.ToString(out.QueueUrl)
}

// e2eSQSCounts asks a queue how many messages wait in it and how many are
// in flight (SQS's approximate numbers, as it gives them).
func e2eSQSCounts(ctx context.Context, c *awssqs.Client, url string) (visible, inFlight string, err error) {
	out, err := c.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		return "", "", err
	}
	return out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)],
		out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)], nil
}

// e2eSendSQS sends msgs to the queue, ten per batch, a few batches at a
// time, and returns them with the message ids the queue gave them.
func e2eSendSQS(ctx context.Context, t *testing.T, c *awssqs.Client, url string, msgs []brokers.Message) []e2eMsg {
	t.Helper()
	out := make([]e2eMsg, len(msgs))
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	next := make(chan int)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for start := range next {
				if err := e2eSendSQSBatch(ctx, c, url, msgs, start, out); err != nil {
					mu.Lock()
					first = cmp.Or(first, err)
					mu.Unlock()
				}
			}
		}()
	}
	for start := 0; start < len(msgs); start += 10 {
		next <- start
	}
	close(next)
	wg.Wait()
	if first != nil {
		t.Fatalf("send to %s: %v", url, first)
	}
	return out
}

func e2eSendSQSBatch(ctx context.Context, c *awssqs.Client, url string, msgs []brokers.Message, start int, out []e2eMsg) error {
	chunk := msgs[start:min(start+10, len(msgs))]
	entries := make([]sqstypes.SendMessageBatchRequestEntry, len(chunk))
	for i, m := range chunk {
		entries[i] = sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(string(m.Value))}
	}
	resp, err := c.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
	if err != nil {
		return err
	}
	if len(resp.Failed) > 0 {
		return fmt.Errorf("%d failed, first: %s", len(resp.Failed), aws.ToString(resp.Failed[0].Message))
	}
	for _, s := range resp.Successful {
		i, err := strconv.Atoi(aws.ToString(s.Id))
		if err != nil || i < 0 || i >= len(chunk) {
			return fmt.Errorf("answer for unknown entry %q", aws.ToString(s.Id))
		}
		m := chunk[i]
		m.ID = aws.ToString(s.MessageId)
		m.Position = m.ID
		out[start+i] = e2eMsg{Msg: m}
	}
	if len(resp.Successful) != len(chunk) {
		return fmt.Errorf("%d of %d sent", len(resp.Successful), len(chunk))
	}
	return nil
}
