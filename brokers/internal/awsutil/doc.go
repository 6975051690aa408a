// Package awsutil is what the SQS and Kinesis adapters share: loading an
// AWS SDK configuration (region, static or default-chain credentials, an
// HTTP transport the adapter owns and closes), checking the endpoint and
// credential fields of their configs, and translating SDK errors into
// *brokers.Error (flattened, so that no SDK type leaves an adapter).
//
// Goroutines: none. The transport's idle connections are the caller's to
// close (CloseIdleConnections) when it closes.
package awsutil
