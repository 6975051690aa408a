package awstest

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/drover-dev/drover/brokers"
)

// PutKinesis puts msgs on stream through c in order, 500 per PutRecords,
// each with its key (or "-" for an unkeyed one) as partition key and, when
// hashKey is not empty, hashKey as explicit hash key. It hands each chunk
// with the server's answers, one per message in order, to each. It stops
// at the first error: of a call, a chunk the server did not take whole,
// or each's.
func PutKinesis(ctx context.Context, c *kinesis.Client, stream, hashKey string, msgs []brokers.Message,
	each func(chunk []brokers.Message, answers []kintypes.PutRecordsResultEntry) error) error {
	for start := 0; start < len(msgs); start += 500 {
		chunk := msgs[start:min(start+500, len(msgs))]
		entries := make([]kintypes.PutRecordsRequestEntry, len(chunk))
		for i, m := range chunk {
			pk := string(m.Key)
			if pk == "" {
				pk = "-"
			}
			entries[i] = kintypes.PutRecordsRequestEntry{Data: m.Value, PartitionKey: aws.String(pk)}
			if hashKey != "" {
				entries[i].ExplicitHashKey = aws.String(hashKey)
			}
		}
		out, err := c.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries})
		if err != nil {
			return fmt.Errorf("put records: %w", err)
		}
		if n := aws.ToInt32(out.FailedRecordCount); n > 0 || len(out.Records) != len(chunk) {
			return fmt.Errorf("put records: %d failed, %d answers for %d", n, len(out.Records), len(chunk))
		}
		if err := each(chunk, out.Records); err != nil {
			return err
		}
	}
	return nil
}
