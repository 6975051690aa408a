// Package kinesis reads an Amazon Kinesis data stream as a brokers.Stream,
// on aws-sdk-go-v2 (AWS JSON 1.1). drover keeps the sequence numbers in its
// own store: there is no KCL and no DynamoDB lease table.
//
// # Shards
//
// Partitions is ListShards (paginated): every shard the stream still
// holds, closed ones included, with Partition.Parents from ParentShardId
// and AdjacentParentShardId. A split gives two children of one parent, a
// merge one child of two. drover starts a child only after each parent was
// read to its end (Result.End) and checkpointed.
//
// # Reading
//
// Open gets a shard iterator at once: TRIM_HORIZON for Earliest, LATEST for
// Latest, and AT_SEQUENCE_NUMBER of Start.After, whose record the first
// GetRecords must return (the reader drops it). When a later record comes
// first, the position was trimmed by retention and Fetch fails with
// brokers.ErrPositionGone (not retryable); records after it may have been
// lost before drover read them.
//
// Fetch calls GetRecords (up to min(max, Config.MaxRecords) records) at most
// once per Config.PollInterval per reader (200 ms: Kinesis allows five
// calls per second per shard), waiting through exec.Wait so that a
// cancelled context ends it at once. As GetRecords never waits, a fetch
// polls until records come or its wait has passed. Throttling
// (ProvisionedThroughputExceededException) pauses the reader, 1 s doubling
// to 10 s, and comes back as a retryable error if the wait ends first. An
// expired iterator (ExpiredIteratorException, after 5 minutes unused) is
// replaced inside the reader from the last record returned.
//
// A record becomes a brokers.Message with Position = SequenceNumber (a
// decimal string of up to 128 bits; brokers.ComparePositions orders them),
// Key = PartitionKey, Value = Data, Time = ApproximateArrivalTimestamp and
// no headers (Kinesis has none). Result.Lag is MillisBehindLatest: a
// number of milliseconds, not of records, -1 when Kinesis does not say.
//
// When a shard was closed by a split or merge and GetRecords returns no
// next iterator, its last records come with Result.End set, and every
// later Fetch returns End at once.
//
// Aggregated records (the KPL's protobuf aggregation format) are not
// de-aggregated: such a record is one message whose Value is the
// aggregate.
//
// # Errors
//
// Every error from Kinesis is a *brokers.Error whose Err carries the SDK
// error's text but no SDK type. Retryable is false for client faults that
// will repeat (a missing stream or shard, an invalid argument, access
// denied) and true for throttling, server faults and lost connections.
// ErrStreamNotFound matches a missing stream, brokers.ErrUnknownPartition a
// missing shard.
//
// # Goroutines
//
// The package starts none of its own; the SDK's HTTP transport keeps idle
// connections, which Close closes after cancelling and waiting for every
// call in flight.
package kinesis
