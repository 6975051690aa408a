package node_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/brokers/awstest"
	"github.com/drover-dev/drover/cluster/config"
	"github.com/drover-dev/drover/cluster/node"
	"github.com/drover-dev/drover/internal/syncbuf"
	"github.com/drover-dev/drover/persistence/stores"
)

// Issue 10, item 9: a node exited when NATS was unreachable at start,
// while it kept retrying when Kafka was. Every source now behaves like
// Kafka's. For each adapter: the broker is behind a proxy that refuses
// connections; the node starts anyway, its tree shows the source (stream)
// or its units (queue) retrying with the broker's error; then the proxy
// listens, and the messages sent meanwhile are applied.
const unreachableMessages = 20

// unreachableCase is one adapter under the test.
type unreachableCase struct {
	typ     string // config type
	queue   bool
	section func(proxy *awstest.Proxy) string // the type's config section, pointed at the proxy
	send    func(ctx context.Context, t *testing.T, i int, value []byte)
}

func TestSourcesStartWhileTheirBrokerIsUnreachable(t *testing.T) {
	t.Run("nats stream", func(t *testing.T) {
		js, host := unreachableNATS(t, "UNRS", "unrs")
		runUnreachable(t, host, unreachableCase{typ: "nats",
			section: func(p *awstest.Proxy) string {
				return fmt.Sprintf("url: %q\nstream: UNRS\nmode: stream", "nats://"+p.Addr())
			},
			send: natsSend(js, "unrs"),
		})
	})
	t.Run("nats queue", func(t *testing.T) {
		js, host := unreachableNATS(t, "UNRQ", "unrq")
		runUnreachable(t, host, unreachableCase{typ: "nats", queue: true,
			section: func(p *awstest.Proxy) string {
				return fmt.Sprintf("url: %q\nstream: UNRQ\nmode: queue\nconsumer: unr\nack_wait: 3s", "nats://"+p.Addr())
			},
			send: natsSend(js, "unrq"),
		})
	})
	t.Run("pubsub", func(t *testing.T) {
		const project, topic = "drover-unr", "projects/drover-unr/topics/t"
		srv := pstest.NewServer()
		t.Cleanup(func() { _ = srv.Close() })
		ctx := context.Background()
		if _, err := srv.GServer.CreateTopic(ctx, &pubsubpb.Topic{Name: topic}); err != nil {
			t.Fatal(err)
		}
		if _, err := srv.GServer.CreateSubscription(ctx, &pubsubpb.Subscription{Name: "projects/" + project + "/subscriptions/unr-sub",
			Topic: topic, AckDeadlineSeconds: 10}); err != nil {
			t.Fatal(err)
		}
		runUnreachable(t, srv.Addr, unreachableCase{typ: "pubsub", queue: true,
			section: func(p *awstest.Proxy) string {
				return fmt.Sprintf("project: %s\nsubscription: unr-sub\nendpoint: %q", project, p.Addr())
			},
			send: func(_ context.Context, _ *testing.T, _ int, v []byte) { srv.Publish(topic, v, nil) },
		})
	})
	t.Run("sqs", func(t *testing.T) {
		ep := e2eSQS.Endpoint(t)
		c := awstest.SQSClient(ep, true)
		ctx := context.Background()
		out, err := c.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String(fmt.Sprintf("drover-unr-%d", os.Getpid()))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = c.DeleteQueue(context.Background(), &awssqs.DeleteQueueInput{QueueUrl: out.QueueUrl}) })
		t.Setenv(e2eAWSSecretEnv, awstest.SecretAccessKey)
		runUnreachable(t, strings.TrimPrefix(ep, "http://"), unreachableCase{typ: "sqs", queue: true,
			section: func(p *awstest.Proxy) string {
				return fmt.Sprintf("queue_url: %q\nregion: %s\nendpoint: %q\nwait: 1s\naccess_key_id: %s\nsecret_access_key: \"${env:%s}\"",
					aws.ToString(out.QueueUrl), awstest.Region, p.Endpoint(), awstest.AccessKeyID, e2eAWSSecretEnv)
			},
			send: func(ctx context.Context, t *testing.T, _ int, v []byte) {
				if _, err := c.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: out.QueueUrl, MessageBody: aws.String(string(v))}); err != nil {
					t.Fatalf("send: %v", err)
				}
			},
		})
	})
	t.Run("kinesis", func(t *testing.T) {
		ep := e2eKinesis.Endpoint(t)
		c := awstest.KinesisClient(ep, true)
		ctx := context.Background()
		name := fmt.Sprintf("drover-unr-%d", os.Getpid())
		if _, err := c.CreateStream(ctx, &awskinesis.CreateStreamInput{StreamName: aws.String(name), ShardCount: aws.Int32(1)}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_, _ = c.DeleteStream(context.Background(), &awskinesis.DeleteStreamInput{StreamName: aws.String(name)})
		})
		if err := e2eWaitFor(ctx, 20*time.Millisecond, 15*time.Second, func() (bool, string) {
			out, err := c.DescribeStreamSummary(ctx, &awskinesis.DescribeStreamSummaryInput{StreamName: aws.String(name)})
			if err != nil {
				return false, err.Error()
			}
			return out.StreamDescriptionSummary.StreamStatus == kintypes.StreamStatusActive, string(out.StreamDescriptionSummary.StreamStatus)
		}); err != nil {
			t.Fatal(err)
		}
		t.Setenv(e2eAWSSecretEnv, awstest.SecretAccessKey)
		runUnreachable(t, strings.TrimPrefix(ep, "http://"), unreachableCase{typ: "kinesis",
			section: func(p *awstest.Proxy) string {
				return e2eKinesisSection(name, p.Endpoint())
			},
			send: func(ctx context.Context, t *testing.T, i int, v []byte) {
				if _, err := c.PutRecord(ctx, &awskinesis.PutRecordInput{StreamName: aws.String(name), Data: v,
					PartitionKey: aws.String(fmt.Sprint(i))}); err != nil {
					t.Fatalf("put: %v", err)
				}
			},
		})
	})
}

// unreachableNATS starts an embedded JetStream server with a stream of
// one subject and returns a JetStream context on it and its host:port.
func unreachableNATS(t *testing.T, stream, subject string) (jetstream.JetStream, string) {
	t.Helper()
	url := e2eStartNATS(t)
	nc, err := natsgo.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: stream, Subjects: []string{subject}}); err != nil {
		t.Fatal(err)
	}
	return js, strings.TrimPrefix(url, "nats://")
}

func natsSend(js jetstream.JetStream, subject string) func(context.Context, *testing.T, int, []byte) {
	return func(ctx context.Context, t *testing.T, _ int, v []byte) {
		if _, err := js.Publish(ctx, subject, v); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
}

func runUnreachable(t *testing.T, target string, c unreachableCase) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	proxy, err := awstest.NewProxy("http://" + target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	proxy.Stop() // connecting is refused, as to a broker that is down

	logs := &syncbuf.Buffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("node log:\n%s", logs.String())
		}
	})
	section := ""
	for _, l := range strings.Split(c.section(proxy), "\n") {
		section += "      " + l + "\n"
	}
	slots := ""
	if c.queue {
		slots = "    slots: 2\n"
	}
	storeURL := e2eSQLiteURL(t)
	yaml := fmt.Sprintf(`  - name: unr
    type: %s
    records: {table: unr, key: id}
    batch_size: 10
    max_wait: 100ms
    discovery_interval: 1s
%s    %s:
%s`, c.typ, slots, c.typ, section)
	cfg, err := config.Parse(e2eConfigYAML("unr-node", storeURL, yaml), config.Options{})
	if err != nil {
		t.Fatalf("config: %v\n%s", err, yaml)
	}
	n, err := node.Start(ctx, cfg, node.Options{
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Tuning: actors.Tuning{RestartBase: 50 * time.Millisecond, RestartCap: 500 * time.Millisecond,
			RetryBase: 50 * time.Millisecond, RetryCap: 300 * time.Millisecond},
	})
	if err != nil {
		t.Fatalf("the node did not start while its broker is unreachable: %v", err)
	}
	defer n.Close()

	// The tree shows the failure: the source (a stream: discovery) or a
	// unit (a queue: its open) retrying with the broker's error.
	var shown string
	if err := e2eWaitFor(ctx, 20*time.Millisecond, 30*time.Second, func() (bool, string) {
		tree := n.Tree()
		if len(tree.Sources) != 1 {
			return false, fmt.Sprintf("%d sources in the tree", len(tree.Sources))
		}
		s := tree.Sources[0]
		if !c.queue {
			shown = s.Error
			return s.State == actors.StateRetrying && strings.Contains(s.Error, "open "), fmt.Sprintf("source %s: %q", s.State, s.Error)
		}
		for _, u := range s.Units {
			if u.State == actors.StateRetrying && strings.Contains(u.LastError, "open ") {
				shown = u.LastError
				return true, ""
			}
		}
		return false, fmt.Sprintf("units %+v", s.Units)
	}); err != nil {
		t.Fatalf("the tree does not show the source retrying with the broker's error: %v", err)
	}
	t.Logf("shown while unreachable: %s", shown)

	for i := 0; i < unreachableMessages; i++ {
		c.send(ctx, t, i, []byte(fmt.Sprintf(`{"id":"k%02d","n":%d}`, i, i)))
	}
	if err := proxy.Start(); err != nil {
		t.Fatal(err)
	}
	st, err := stores.Open(ctx, storeURL, stores.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := e2eWaitFor(ctx, 50*time.Millisecond, 60*time.Second, func() (bool, string) {
		recs, err := st.Records(ctx, "unr", "", 0)
		if err != nil {
			return false, err.Error()
		}
		return len(recs) == unreachableMessages, fmt.Sprintf("%d of %d records applied; tree %+v", len(recs), unreachableMessages, n.Tree().Sources)
	}); err != nil {
		t.Fatalf("after the broker became reachable: %v", err)
	}
}
