package sqs_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.uber.org/goleak"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/awstest"
	"github.com/drover-dev/drover/brokers/brokertest"
	"github.com/drover-dev/drover/brokers/sqs"
)

var server = awstest.SQS()

func TestMain(m *testing.M) { os.Exit(awstest.Main(m, server)) }

// harness makes fresh queues on the emulator for brokertest and the
// focused tests. The adapter under test reaches the emulator through a
// proxy of its own (to stop it or cut its connections); the fixture's
// client goes direct.
type harness struct {
	endpoint string
	fifo     bool
}

func newHarness(t *testing.T) harness {
	t.Helper()
	return harness{endpoint: server.Endpoint(t)}
}

func (h harness) IgnoreGoroutines() []goleak.Option { return awstest.IgnoreGoroutines() }

func (h harness) NewQueue(t *testing.T, opts brokertest.QueueOptions) brokertest.QueueFixture {
	return h.newFixture(t, opts.AckDeadline)
}

type fixture struct {
	awstest.Faults
	client *awssqs.Client
	url    string
	fifo   bool
	vis    time.Duration
	seq    atomic.Int64
}

func (h harness) newFixture(t testing.TB, ackDeadline time.Duration) *fixture {
	t.Helper()
	vis := 30 * time.Second
	if ackDeadline > 0 {
		vis = time.Duration(math.Ceil(ackDeadline.Seconds())) * time.Second
	}
	name := awstest.Name()
	attrs := map[string]string{"VisibilityTimeout": strconv.Itoa(int(vis / time.Second))}
	if h.fifo {
		name += ".fifo"
		attrs["FifoQueue"] = "true"
	}
	c := awstest.SQSClient(h.endpoint, false)
	ctx, cancel := awstest.CallContext()
	defer cancel()
	out, err := c.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		t.Fatalf("create queue %s: %v", name, err)
	}
	url := aws.ToString(out.QueueUrl)
	awstest.CleanupDelete(t, "queue "+name, func(ctx context.Context) error {
		_, err := c.DeleteQueue(ctx, &awssqs.DeleteQueueInput{QueueUrl: aws.String(url)})
		return err
	})
	return &fixture{Faults: awstest.StartProxy(t, h.endpoint), client: c, url: url, fifo: h.fifo, vis: vis}
}

// config is the adapter's config for this queue, through the proxy, with
// the queue's visibility timeout (every receive sends it; unset it would
// be sqs.DefaultVisibilityTimeout, whatever the queue says).
func (f *fixture) config() sqs.Config {
	return sqs.Config{
		QueueURL:          f.url,
		Region:            awstest.Region,
		Endpoint:          f.Proxy.Endpoint(),
		AccessKeyID:       awstest.AccessKeyID,
		SecretAccessKey:   awstest.SecretAccessKey,
		VisibilityTimeout: f.vis,
	}
}

func (f *fixture) Open(t *testing.T) brokers.Queue { return f.open(t, f.config()) }

func (f *fixture) open(t testing.TB, cfg sqs.Config) *sqs.Queue {
	t.Helper()
	return awstest.Open(t, "sqs.NewQueue", func(ctx context.Context) (*sqs.Queue, error) {
		return sqs.NewQueue(ctx, cfg)
	})
}

// Send sends msgs, ten per SendMessageBatch, with their headers and key as
// message attributes. On a FIFO queue the group is the key ("g" when
// none) and the deduplication id a sequence number of the fixture.
func (f *fixture) Send(ctx context.Context, msgs ...brokers.Message) error {
	_, err := f.send(ctx, msgs...)
	return err
}

func (f *fixture) send(ctx context.Context, msgs ...brokers.Message) ([]string, error) {
	var ids []string
	for start := 0; start < len(msgs); start += 10 {
		chunk := msgs[start:min(start+10, len(msgs))]
		entries := make([]sqstypes.SendMessageBatchRequestEntry, len(chunk))
		for i, m := range chunk {
			e := sqstypes.SendMessageBatchRequestEntry{
				Id:                aws.String(strconv.Itoa(i)),
				MessageBody:       aws.String(string(m.Value)),
				MessageAttributes: map[string]sqstypes.MessageAttributeValue{},
			}
			for _, h := range m.Headers {
				e.MessageAttributes[h.Key] = sqstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(string(h.Value))}
			}
			if m.Key != nil {
				e.MessageAttributes["key"] = sqstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(string(m.Key))}
			}
			if len(e.MessageAttributes) == 0 {
				e.MessageAttributes = nil
			}
			if f.fifo {
				g := string(m.Key)
				if g == "" {
					g = "g"
				}
				e.MessageGroupId = aws.String(g)
				e.MessageDeduplicationId = aws.String("d-" + strconv.FormatInt(f.seq.Add(1), 10))
			}
			entries[i] = e
		}
		out, err := f.client.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: aws.String(f.url), Entries: entries})
		if err != nil {
			return ids, err
		}
		if len(out.Failed) > 0 {
			return ids, fmt.Errorf("send: %d failed, first %s: %s", len(out.Failed), aws.ToString(out.Failed[0].Code), aws.ToString(out.Failed[0].Message))
		}
		byEntry := map[string]string{}
		for _, s := range out.Successful {
			byEntry[aws.ToString(s.Id)] = aws.ToString(s.MessageId)
		}
		for i := range chunk {
			ids = append(ids, byEntry[strconv.Itoa(i)])
		}
	}
	return ids, nil
}

func (f *fixture) AckDeadline() time.Duration { return f.vis }

var (
	_ brokertest.QueueHarness     = harness{}
	_ brokertest.LeakIgnorer      = harness{}
	_ brokertest.ServerRestarter  = (*fixture)(nil)
	_ brokertest.ConnectionCutter = (*fixture)(nil)
)

// onBothKinds runs body as the subtests fifo=false and fifo=true, each on
// a fresh fixture (visibility timeout vis) of a standard or a FIFO queue.
func onBothKinds(t *testing.T, vis time.Duration, body func(t *testing.T, f *fixture)) {
	for _, fifo := range []bool{false, true} {
		t.Run(fmt.Sprintf("fifo=%v", fifo), func(t *testing.T) {
			h := newHarness(t)
			h.fifo = fifo
			body(t, h.newFixture(t, vis))
		})
	}
}
