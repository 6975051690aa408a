package kinesis_test

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmw "github.com/aws/aws-sdk-go-v2/aws/middleware"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"go.uber.org/goleak"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/awstest"
	"github.com/drover-dev/drover/brokers/brokertest"
	"github.com/drover-dev/drover/brokers/kinesis"
	"github.com/drover-dev/drover/internal/kinesistest"
)

var server = awstest.Kinesis()

func TestMain(m *testing.M) { os.Exit(awstest.Main(m, server)) }

// harness makes fresh streams on the emulator for brokertest and the
// focused tests. The adapter under test reaches the emulator through a
// proxy of its own (to stop it or cut its connections); the fixture's
// client goes direct.
type harness struct{ endpoint string }

func newHarness(t *testing.T) harness {
	t.Helper()
	return harness{endpoint: server.Endpoint(t)}
}

func (h harness) IgnoreGoroutines() []goleak.Option { return awstest.IgnoreGoroutines() }

func (h harness) NewStream(t *testing.T, partitions int) brokertest.StreamFixture {
	return h.newFixture(t, partitions)
}

type fixture struct {
	awstest.Faults
	client *awskinesis.Client
	name   string
}

func (h harness) newFixture(t testing.TB, shards int) *fixture {
	t.Helper()
	name := awstest.Name()
	c := awstest.KinesisClient(h.endpoint, false)
	ctx, cancel := awstest.CallContext()
	defer cancel()
	if _, err := c.CreateStream(ctx, &awskinesis.CreateStreamInput{StreamName: aws.String(name), ShardCount: aws.Int32(int32(shards))}); err != nil {
		t.Fatalf("create stream %s: %v", name, err)
	}
	awstest.CleanupDelete(t, "stream "+name, func(ctx context.Context) error {
		_, err := c.DeleteStream(ctx, &awskinesis.DeleteStreamInput{StreamName: aws.String(name)})
		return err
	})
	f := &fixture{client: c, name: name}
	if err := f.waitActive(ctx); err != nil {
		t.Fatal(err)
	}
	f.Faults = awstest.StartProxy(t, h.endpoint)
	return f
}

func (f *fixture) waitActive(ctx context.Context) error {
	return kinesistest.WaitActive(ctx, f.client, f.name)
}

// config is the adapter's config for this stream, through the proxy.
func (f *fixture) config() kinesis.Config {
	return kinesis.Config{
		StreamName:      f.name,
		Region:          awstest.Region,
		Endpoint:        f.Proxy.Endpoint(),
		AccessKeyID:     awstest.AccessKeyID,
		SecretAccessKey: awstest.SecretAccessKey,
	}
}

func (f *fixture) Open(t *testing.T) brokers.Stream { return f.open(t, f.config()) }

func (f *fixture) open(t testing.TB, cfg kinesis.Config) *kinesis.Stream {
	t.Helper()
	return awstest.Open(t, "kinesis.NewStream", func(ctx context.Context) (*kinesis.Stream, error) {
		return kinesis.NewStream(ctx, cfg)
	})
}

// recreate deletes the stream and creates it again with the same name and
// shard count, so that its shards have the same ids. kinesalite encodes a
// shard's creation second in its sequence numbers (as Kinesis tells streams
// apart by them): a stream created again within the same second would hand
// out the very numbers of the old one, so recreate repeats until the first
// shard's starting sequence number differs from the old one's.
func (f *fixture) recreate(ctx context.Context) error {
	old, err := f.shards(ctx)
	if err != nil || len(old) == 0 {
		return fmt.Errorf("list shards of %s: %v %v", f.name, old, err)
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := f.client.DeleteStream(ctx, &awskinesis.DeleteStreamInput{StreamName: aws.String(f.name)}); err != nil {
			return fmt.Errorf("delete stream %s: %w", f.name, err)
		}
		if err := f.waitDeleted(ctx); err != nil {
			return err
		}
		if _, err := f.client.CreateStream(ctx, &awskinesis.CreateStreamInput{StreamName: aws.String(f.name), ShardCount: aws.Int32(int32(len(old)))}); err != nil {
			return fmt.Errorf("create stream %s again: %w", f.name, err)
		}
		if err := f.waitActive(ctx); err != nil {
			return err
		}
		now, err := f.shards(ctx)
		if err != nil {
			return err
		}
		if aws.ToString(now[0].SequenceNumberRange.StartingSequenceNumber) != aws.ToString(old[0].SequenceNumberRange.StartingSequenceNumber) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("stream %s created again with the old sequence numbers until: %w", f.name, ctx.Err())
		case <-tick.C:
		}
	}
}

func (f *fixture) waitDeleted(ctx context.Context) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		_, err := f.client.DescribeStreamSummary(ctx, &awskinesis.DescribeStreamSummaryInput{StreamName: aws.String(f.name)})
		var nf *kintypes.ResourceNotFoundException
		if errors.As(err, &nf) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("stream %s not deleted (%v): %w", f.name, err, ctx.Err())
		case <-tick.C:
		}
	}
}

// serverTime is the emulator's clock (the Date of an answer: seconds).
func (f *fixture) serverTime(ctx context.Context) (time.Time, error) {
	out, err := f.client.DescribeStreamSummary(ctx, &awskinesis.DescribeStreamSummaryInput{StreamName: aws.String(f.name)})
	if err != nil {
		return time.Time{}, err
	}
	t, ok := awsmw.GetServerTime(out.ResultMetadata)
	if !ok {
		return time.Time{}, errors.New("the emulator's answer has no Date header")
	}
	return t, nil
}

func (f *fixture) shards(ctx context.Context) ([]kintypes.Shard, error) {
	out, err := f.client.ListShards(ctx, &awskinesis.ListShardsInput{StreamName: aws.String(f.name)})
	if err != nil {
		return nil, err
	}
	return out.Shards, nil
}

func (f *fixture) shard(ctx context.Context, id string) (kintypes.Shard, error) {
	shards, err := f.shards(ctx)
	if err != nil {
		return kintypes.Shard{}, err
	}
	for _, s := range shards {
		if aws.ToString(s.ShardId) == id {
			return s, nil
		}
	}
	return kintypes.Shard{}, fmt.Errorf("no shard %s in %s", id, f.name)
}

// Produce writes msgs to shard partition in one PutRecords, each with the
// shard's starting hash key as explicit hash key, and its key (or "-") as
// partition key.
func (f *fixture) Produce(ctx context.Context, partition string, msgs ...brokers.Message) ([]string, error) {
	sh, err := f.shard(ctx, partition)
	if err != nil {
		return nil, err
	}
	var seqs []string
	err = awstest.PutKinesis(ctx, f.client, f.name, aws.ToString(sh.HashKeyRange.StartingHashKey), msgs,
		func(_ []brokers.Message, answers []kintypes.PutRecordsResultEntry) error {
			for _, r := range answers {
				if aws.ToString(r.ShardId) != partition {
					return fmt.Errorf("record went to %s, not %s", aws.ToString(r.ShardId), partition)
				}
				seqs = append(seqs, aws.ToString(r.SequenceNumber))
			}
			return nil
		})
	return seqs, err
}

// Split splits partition in the middle of its hash range and returns the
// two children.
func (f *fixture) Split(ctx context.Context, partition string) ([]string, error) {
	sh, err := f.shard(ctx, partition)
	if err != nil {
		return nil, err
	}
	lo, _ := new(big.Int).SetString(aws.ToString(sh.HashKeyRange.StartingHashKey), 10)
	hi, _ := new(big.Int).SetString(aws.ToString(sh.HashKeyRange.EndingHashKey), 10)
	mid := new(big.Int).Rsh(new(big.Int).Add(lo, hi), 1)
	mid.Add(mid, big.NewInt(1))
	if _, err := f.client.SplitShard(ctx, &awskinesis.SplitShardInput{
		StreamName: aws.String(f.name), ShardToSplit: aws.String(partition), NewStartingHashKey: aws.String(mid.String()),
	}); err != nil {
		return nil, err
	}
	if err := f.waitActive(ctx); err != nil {
		return nil, err
	}
	return f.children(ctx, partition)
}

// Merge merges two adjacent shards and returns the child.
func (f *fixture) Merge(ctx context.Context, a, b string) (string, error) {
	if _, err := f.client.MergeShards(ctx, &awskinesis.MergeShardsInput{
		StreamName: aws.String(f.name), ShardToMerge: aws.String(a), AdjacentShardToMerge: aws.String(b),
	}); err != nil {
		return "", err
	}
	if err := f.waitActive(ctx); err != nil {
		return "", err
	}
	kids, err := f.children(ctx, a)
	if err != nil || len(kids) != 1 {
		return "", fmt.Errorf("merge children %v: %v", kids, err)
	}
	return kids[0], nil
}

func (f *fixture) children(ctx context.Context, parent string) ([]string, error) {
	shards, err := f.shards(ctx)
	if err != nil {
		return nil, err
	}
	var kids []string
	for _, s := range shards {
		if aws.ToString(s.ParentShardId) == parent || aws.ToString(s.AdjacentParentShardId) == parent {
			kids = append(kids, aws.ToString(s.ShardId))
		}
	}
	return kids, nil
}

var (
	_ brokertest.StreamHarness    = harness{}
	_ brokertest.LeakIgnorer      = harness{}
	_ brokertest.Resharder        = (*fixture)(nil)
	_ brokertest.ServerRestarter  = (*fixture)(nil)
	_ brokertest.ConnectionCutter = (*fixture)(nil)
)
