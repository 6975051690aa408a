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
// # Positions and starts
//
// A position is a record's SequenceNumber, or "<SequenceNumber>/<index>"
// for a user record of a KPL aggregate (see below). Open starts a reader after
// Start.After, else at Start.At, else at Start.Mode:
//
//   - After: AT_SEQUENCE_NUMBER of it, whose record the first GetRecords
//     must return (the reader drops it). When a later record comes first,
//     or a closed shard ends without it, the record is not held: when the
//     number lies inside the shard's SequenceNumberRange it was trimmed by
//     retention, and Fetch fails with brokers.ErrPositionGone (not
//     retryable; records after it may have been lost before drover read
//     them); when it lies before the shard's first number or after a
//     closed shard's last, it never was one of this shard's:
//     brokers.ErrPositionUnknown.
//   - At: AT_TIMESTAMP, the first record whose ApproximateArrivalTimestamp
//     is at or after it. A time that Kinesis refuses as later than its
//     clock (InvalidArgumentException) is read from LATEST instead: no
//     record stamped at or after it can exist yet.
//   - Earliest: TRIM_HORIZON. Latest: LATEST, "latest as of Open".
//
// Before its first record, a reader whose iterator expires asks
// AT_TIMESTAMP of its start again; after a LATEST iterator, of the
// server's time of that call less ServerClockMargin, so that records
// that arrived meanwhile are not skipped.
//
// Resolve (brokers.Resolver) fixes a unit's start before it reads
// anything. Kinesis can name neither the position before a shard's first
// record nor its newest sequence number, so Resolve(Earliest) is
// Start{Mode: Earliest} (TRIM_HORIZON) and Resolve(Latest) is Start{At: t}:
// t is the server's time of the call, the Date header of its answer (one
// second resolution, truncated, so not later than the server's clock),
// less ServerClockMargin (1 s: a Date rounded up on the way, the spread of
// the clocks of Kinesis's hosts); without a Date header, the local time
// before the call less LocalClockMargin (30 s, for a local clock ahead of
// the server's). Every record written after Resolve returns is stamped
// after t and is read, however long before Open; the cost is re-reading
// the last second or two before the call (skipping a record is not
// acceptable, re-reading a little backlog is). Resolve makes one
// GetShardIterator call, which also checks the shard (a shard the stream
// does not list is brokers.ErrUnknownPartition).
//
// # A stream deleted and created again
//
// A stream deleted and created with the same name has shards with the
// same ids, whose sequence numbers Kinesis tells apart from the old
// stream's: GetShardIterator of an old number fails with
// InvalidArgumentException ("StartingSequenceNumber ... did not come from
// this stream"). Open (or a Fetch that acquires a new iterator) returns
// that, and any other InvalidArgumentException for a sequence number of a
// shard the stream lists (a number of another shard, a malformed one), as
// brokers.ErrPositionUnknown inside a non-retryable *brokers.Error naming
// the shard, the number and Kinesis's message, so that drover resets the
// unit's position (on_position_reset) instead of retrying forever. A reader
// whose old iterator reads on into the new stream (kinesalite does that)
// finds the record it starts after missing and the number before the new
// shard's first: brokers.ErrPositionUnknown too. A reader that already
// read past its start goes on reading the new stream's records, which
// all come after the old numbers: nothing is skipped. Not told apart: a
// number beyond the end of an open shard, should Kinesis accept it (its
// range has no end to compare with): the reader waits for the record,
// records with lower numbers are not returned, and the first with a
// higher one is reported as brokers.ErrPositionGone.
//
// # Reading
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
// A plain record becomes a brokers.Message with Position = SequenceNumber
// (a decimal string of up to 128 bits; brokers.ComparePositions orders
// them), Key = PartitionKey, Value = Data, Time =
// ApproximateArrivalTimestamp and no headers (Kinesis has none). Kinesis does not count the records
// behind a reader, it dates them: Result.Lag is 0 when GetRecords says
// MillisBehindLatest 0 (caught up) and -1 otherwise (until issue 13 it
// carried the milliseconds, a unit no other adapter used), and
// Result.Oldest is the local time of the call less MillisBehindLatest, so
// that lag_seconds is MillisBehindLatest aged since the call. kinesalite
// answers MillisBehindLatest 0 for every open shard, read to its tip or
// not: against it a reader looks caught up between its fetches.
//
// When a shard was closed by a split or merge and GetRecords returns no
// next iterator, its last records come with Result.End set, and every
// later Fetch returns End at once.
//
// # KPL aggregates
//
// A record whose data starts with the KPL magic bytes (0xF3 0x89 0x9A
// 0xC2: a protobuf AggregatedRecord and its MD5, amazon-kinesis-producer's
// aggregation-format.md; decoded in kpl.go on protowire, as the Go module
// of awslabs/kinesis-aggregation is not served by the module proxy) becomes
// its user records: Position "<sequence number>/<index>"
// (brokers.SubPosition), Key its own partition key, Value its data, the
// header HeaderExplicitHashKey when it has an explicit hash key, Time the
// aggregate's. A Fetch returns at most max messages and keeps the rest of
// an aggregate for the next one (counted in Result.Lag when the shard is
// caught up; Result.Oldest is their time). A start after a sub-position
// reads AT_SEQUENCE_NUMBER of the aggregate and drops its user records up
// to the index (a sub-position the record does not have, a plain
// record's or past the aggregate's end, is brokers.ErrPositionUnknown on
// the first Fetch); a start after an aggregate's plain sequence number (a
// checkpoint written before de-aggregation) drops it whole. An aggregate
// that is too short, whose MD5 does not match, or whose protobuf is
// truncated or malformed is one message at its sequence number with
// Message.Reject set to why: drover dead-letters it whole. User records
// are not filtered by the shard's hash key range.
//
// # Errors
//
// Every error from Kinesis is a *brokers.Error whose Err carries the SDK
// error's text but no SDK type. Retryable is false for client faults that
// will repeat (a missing stream or shard, an invalid argument, access
// denied) and true for throttling, server faults and lost connections.
// ErrStreamNotFound matches a missing stream, brokers.ErrUnknownPartition a
// missing shard, brokers.ErrPositionGone a trimmed position and
// brokers.ErrPositionUnknown a sequence number that is not the shard's
// (all four not retryable).
//
// # Goroutines
//
// The package starts none of its own; the SDK's HTTP transport keeps idle
// connections, which Close closes after cancelling and waiting for every
// call in flight.
package kinesis
