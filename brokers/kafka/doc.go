// Package kafka reads a Kafka topic as a brokers.Stream on franz-go, with
// drover keeping the positions: partitions are consumed directly
// (kgo.ConsumePartitions from the checkpoint), never through a consumer
// group, and no offset is committed unless CommitToGroup asks for a copy.
//
// # Guarantees
//
//   - Order per partition: a Reader returns its partition's records in
//     offset order, each once, with Position the decimal offset.
//   - Start: After p resumes at offset p+1 and fails with
//     brokers.ErrPositionGone when p+1 is below the log start (retention or
//     DeleteRecords removed it) or beyond the end (the topic was recreated);
//     Latest is fixed at the high watermark when Open returns; Earliest is
//     the log start. Records deleted while a reader is behind surface as
//     ErrPositionGone from Fetch (the client never silently resets).
//   - Carried: key, value, headers in order, the record timestamp; a record
//     with a key and a null value is a Tombstone. Result.Lag is the high
//     watermark minus the next offset.
//   - Errors leave the package as *brokers.Error (Retryable decided here:
//     Kafka's own retriable flag, connection errors retryable, TLS and
//     authentication failures not) or as the caller's ctx.Err(); no
//     franz-go type is visible outside.
//   - Secrets: the SASL password is never logged; Config's SASL prints it
//     redacted.
//
// # Clients and goroutines
//
// Each Reader has its own franz-go client consuming exactly one partition.
// A shared client would return records of all assigned partitions from one
// poll, and would need a goroutine and a buffer per partition to hand them
// to their readers, plus pause/resume bookkeeping so that a slow unit does
// not stall the others or grow a buffer nobody bounds. One client per
// partition keeps each reader's buffer bounded by FetchMaxPartitionBytes,
// makes Close of one unit independent of the others, and costs one broker
// connection per owned partition, which is small for the tens of
// partitions a drover node owns. A further client, owned by the Stream,
// does metadata, offset listing and group commits.
//
// The franz-go clients own their goroutines; Reader.Close and Stream.Close
// close the clients and return after they have stopped. Fetch runs on the
// caller's goroutine (an exec job): it waits on the client's buffer with a
// context bounded by wait, so cancellation returns at once with ctx.Err(),
// and Stream.Close from another goroutine ends it with brokers.ErrClosed.
package kafka
