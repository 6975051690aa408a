package kinesis_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/awstest"
)

// BenchmarkRead compares, in the same run, reading a shard of 10,000
// records from TRIM_HORIZON through the adapter (Open Earliest + Fetch
// 10,000) with the raw SDK client doing the same calls (GetShardIterator
// TRIM_HORIZON + GetRecords with Limit 10,000 until all are read). Metrics:
// records/s of each, and the adapter's share of the raw rate in percent.
func BenchmarkRead(b *testing.B) {
	ep := server.Endpoint(b)
	const n = 10000
	f := harness{endpoint: ep}.newFixture(b, 1)
	ctx := context.Background()
	shard := "shardId-000000000000"
	batch := make([]brokers.Message, n)
	for i := range batch {
		batch[i] = brokers.Message{Key: []byte("k" + strconv.Itoa(i%97)), Value: []byte(`{"id":` + strconv.Itoa(i) + `,"name":"benchmark record"}`)}
	}
	if _, err := f.Produce(ctx, shard, batch...); err != nil {
		b.Fatal(err)
	}
	cfg := f.config()
	cfg.Endpoint = ep // no proxy: the same path as the raw client
	s := f.open(b, cfg)
	raw := awstest.KinesisClient(ep, true)
	adapter := func() time.Duration {
		start := time.Now()
		r, err := s.OpenReader(ctx, shard, brokers.Start{Mode: brokers.Earliest})
		if err != nil {
			b.Fatal(err)
		}
		for got := 0; got < n; {
			res, err := r.Fetch(ctx, 10000, 0)
			if err != nil {
				b.Fatal(err)
			}
			got += len(res.Messages)
		}
		_ = r.Close()
		return time.Since(start)
	}
	rawSide := func() time.Duration {
		start := time.Now()
		it, err := raw.GetShardIterator(ctx, &awskinesis.GetShardIteratorInput{
			StreamName: aws.String(f.name), ShardId: aws.String(shard), ShardIteratorType: kintypes.ShardIteratorTypeTrimHorizon,
		})
		if err != nil {
			b.Fatal(err)
		}
		iter := it.ShardIterator
		for got := 0; got < n; {
			out, err := raw.GetRecords(ctx, &awskinesis.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(10000)})
			if err != nil {
				b.Fatal(err)
			}
			got += len(out.Records)
			iter = out.NextShardIterator
		}
		return time.Since(start)
	}
	awstest.Compare(b, n, "rec", adapter, rawSide)
}
