package awstest

import (
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// SQSClient returns a raw SDK client of the SQS server at endpoint, with the
// dummy credentials, for tests that prepare queues and send messages
// without the adapter. With keepAlive false it keeps no idle connection
// (so it leaves no goroutine behind for goleak); with true it reuses them,
// as a production client would.
func SQSClient(endpoint string, keepAlive bool) *sqs.Client {
	return sqs.New(sqs.Options{
		Region:       Region,
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider(AccessKeyID, SecretAccessKey, ""),
		HTTPClient:   httpClient(keepAlive),
	})
}

// KinesisClient is SQSClient for Kinesis.
func KinesisClient(endpoint string, keepAlive bool) *kinesis.Client {
	return kinesis.New(kinesis.Options{
		Region:       Region,
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider(AccessKeyID, SecretAccessKey, ""),
		HTTPClient:   httpClient(keepAlive),
	})
}

func httpClient(keepAlive bool) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DisableKeepAlives = !keepAlive
	tr.MaxIdleConnsPerHost = 16
	return &http.Client{Transport: tr}
}
