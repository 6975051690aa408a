// Package kinesistest creates Kinesis streams for tests that run against an
// emulator (brokers/awstest starts one): a stream lives until its test
// ends. It also encodes KPL aggregates (Aggregate) for tests to put. It
// starts no goroutines.
package kinesistest

import (
	"context"
	"crypto/md5"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"google.golang.org/protobuf/encoding/protowire"
)

// CreateStream creates a stream of the given shards through c, named
// prefix-PID so that test processes running at once each have their own,
// failing t where it cannot, and deletes it when t ends (a failed delete
// is logged). It returns the stream's name once the stream is ACTIVE
// (WaitActive), failing t when it does not get there.
func CreateStream(ctx context.Context, t testing.TB, c *awskinesis.Client, prefix string, shards int32) string {
	t.Helper()
	name := fmt.Sprintf("%s-%d", prefix, os.Getpid())
	if _, err := c.CreateStream(ctx, &awskinesis.CreateStreamInput{StreamName: aws.String(name), ShardCount: aws.Int32(shards)}); err != nil {
		t.Fatalf("create stream %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if _, err := c.DeleteStream(ctx, &awskinesis.DeleteStreamInput{StreamName: aws.String(name)}); err != nil {
			t.Logf("delete stream %s: %v", name, err)
		}
	})
	if err := WaitActive(ctx, c, name); err != nil {
		t.Fatal(err)
	}
	return name
}

// WaitActive waits until stream is ACTIVE (after its creation or a
// reshard), asking every 20 ms for at most 15 s, less when ctx ends first.
func WaitActive(ctx context.Context, c *awskinesis.Client, stream string) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		out, err := c.DescribeStreamSummary(ctx, &awskinesis.DescribeStreamSummaryInput{StreamName: aws.String(stream)})
		if err != nil {
			return fmt.Errorf("describe stream %s: %w", stream, err)
		}
		status := out.StreamDescriptionSummary.StreamStatus
		if status == kintypes.StreamStatusActive {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("stream %s is %s: %w", stream, status, ctx.Err())
		case <-tick.C:
		}
	}
}

// UserRecord is one user record of a KPL aggregate (Aggregate).
type UserRecord struct {
	PartitionKey    string
	ExplicitHashKey string // "" for none
	Data            []byte
}

// Aggregate encodes records as the KPL does (amazon-kinesis-producer's
// aggregation-format.md): the magic bytes 0xF3 0x89 0x9A 0xC2, a protobuf
// AggregatedRecord with tables of the distinct partition and explicit hash
// keys, and the MD5 of the protobuf bytes.
func Aggregate(records ...UserRecord) []byte {
	var keys, hashes []string
	index := func(table *[]string, k string) uint64 {
		for i, v := range *table {
			if v == k {
				return uint64(i)
			}
		}
		*table = append(*table, k)
		return uint64(len(*table) - 1)
	}
	var recs [][]byte
	for _, r := range records {
		var b []byte
		b = protowire.AppendTag(b, 1, protowire.VarintType)
		b = protowire.AppendVarint(b, index(&keys, r.PartitionKey))
		if r.ExplicitHashKey != "" {
			b = protowire.AppendTag(b, 2, protowire.VarintType)
			b = protowire.AppendVarint(b, index(&hashes, r.ExplicitHashKey))
		}
		b = protowire.AppendTag(b, 3, protowire.BytesType)
		b = protowire.AppendBytes(b, r.Data)
		recs = append(recs, b)
	}
	var body []byte
	for _, k := range keys {
		body = protowire.AppendTag(body, 1, protowire.BytesType)
		body = protowire.AppendString(body, k)
	}
	for _, h := range hashes {
		body = protowire.AppendTag(body, 2, protowire.BytesType)
		body = protowire.AppendString(body, h)
	}
	for _, r := range recs {
		body = protowire.AppendTag(body, 3, protowire.BytesType)
		body = protowire.AppendBytes(body, r)
	}
	sum := md5.Sum(body)
	out := append([]byte{0xF3, 0x89, 0x9A, 0xC2}, body...)
	return append(out, sum[:]...)
}
