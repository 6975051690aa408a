// Package kinesistest creates Kinesis streams for tests that run against an
// emulator (brokers/awstest starts one): a stream lives until its test
// ends. It starts no goroutines.
package kinesistest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
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
