package node_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/awstest"
	"github.com/drover-dev/drover/internal/kinesistest"
)

// Amazon Kinesis end to end on kinesalite: one stream of two shards; a
// message's partition key is its key, so every key lives in one shard.
func TestE2EKinesis(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ep, c, name := e2eKinesisStream(ctx, t, "drover-e2e")
	sent := e2ePutKinesis(ctx, t, c, name, e2eWorkload(t, 51, false, false))

	rec := &e2eSource{Name: "kin-orders", Table: "kin_orders", Sent: sent}
	aud := &e2eSource{Name: "kin-audit", Audit: true, Sent: sent}
	t.Setenv(e2eAWSSecretEnv, awstest.SecretAccessKey)
	section := e2eKinesisSection(name, ep)
	res := runE2E(t, e2eRun{
		StoreURL:    e2eSQLiteURL(t),
		Sources:     []*e2eSource{rec, aud},
		SourcesYAML: rec.YAML("kinesis", section) + aud.YAML("kinesis", section),
	})
	e2eNoSecret(t, res, awstest.SecretAccessKey)
}

// e2ePutKinesis puts msgs in order, 500 per call, with their key (or "-"
// for an unkeyed one) as partition key, and returns them with their shards
// and sequence numbers.
func e2ePutKinesis(ctx context.Context, t *testing.T, c *awskinesis.Client, stream string, msgs []brokers.Message) []e2eMsg {
	t.Helper()
	out := make([]e2eMsg, 0, len(msgs))
	shards := map[string]int{}
	err := awstest.PutKinesis(ctx, c, stream, "", msgs, func(chunk []brokers.Message, answers []kintypes.PutRecordsResultEntry) error {
		for i, r := range answers {
			m := chunk[i]
			m.Position = aws.ToString(r.SequenceNumber)
			shard := aws.ToString(r.ShardId)
			shards[shard]++
			out = append(out, e2eMsg{Part: shard, Msg: m})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(shards) != 2 {
		t.Fatalf("records went to shards %v: want both shards used", shards)
	}
	return out
}

// e2eKinesisStream creates a stream of two shards on the test's
// kinesalite, named after prefix; it returns kinesalite's endpoint, a
// client and the stream's name.
func e2eKinesisStream(ctx context.Context, t *testing.T, prefix string) (string, *awskinesis.Client, string) {
	t.Helper()
	ep := e2eKinesis.Endpoint(t)
	c := awstest.KinesisClient(ep, true)
	return ep, c, kinesistest.CreateStream(ctx, t, c, prefix, 2)
}

// e2eKinesisSection is the kinesis section of a source reading stream
// at endpoint, its secret key read from e2eAWSSecretEnv (the caller sets
// it: t.Setenv(e2eAWSSecretEnv, awstest.SecretAccessKey)).
func e2eKinesisSection(stream, endpoint string) string {
	return fmt.Sprintf("stream: %s\nregion: %s\nendpoint: %q\naccess_key_id: %s\nsecret_access_key: \"${env:%s}\"",
		stream, awstest.Region, endpoint, awstest.AccessKeyID, e2eAWSSecretEnv)
}
