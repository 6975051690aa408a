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
)

// CreateStream creates a stream of the given shards through c, named
// prefix-PID so that test processes running at once each have their own,
// failing t where it cannot, and deletes it when t ends (a failed delete
// is logged). It returns the stream's name. The stream is CREATING when it
// returns: the caller waits for it to be ACTIVE as it sees fit.
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
	return name
}
