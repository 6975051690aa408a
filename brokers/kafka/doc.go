// Package kafka reads a Kafka topic as a brokers.Stream on franz-go, with
// drover keeping the positions: partitions are consumed directly
// (added to a shared client at the checkpoint), never through a consumer
// group, and no offset is committed unless CommitToGroup asks for a copy.
//
// # Guarantees
//
//   - Order per partition: a Reader returns its partition's records in
//     offset order, each once, with Position the decimal offset.
//   - Isolation: read_committed by default (Config.Isolation
//     ReadUncommitted opts out): a reader returns the records of
//     committed transactions and records written outside transactions,
//     never those of aborted ones,
//     and waits at the last stable offset (LSO) while a transaction is
//     open, so records written after it are held back with it. Control
//     records (transaction markers) are never returned, with either
//     isolation: the reader steps past them.
//   - Start: After p resumes at offset p+1. Open fails with
//     brokers.ErrPositionGone when p+1 is below the log start (retention or
//     DeleteRecords removed it) and with brokers.ErrPositionUnknown when it
//     is beyond the high watermark (the topic was deleted and created
//     again, or an unclean leader election truncated the log): such an
//     offset may be reused by new records, so reading on after it would
//     drop them. At t starts at the first record stamped at or after t
//     (ListOffsets by timestamp), or at the end when there is none. Latest
//     is fixed when Open returns, at the LSO (read_committed: a record of a
//     transaction still open is read if it commits) or the high watermark;
//     Earliest is the log start.
//   - Resolve (brokers.Resolver) names a start as a position: Earliest is
//     After logStart-1, Latest After end-1 (end as for Latest above);
//     either is Start{Mode: Earliest} when that offset would be -1 (an
//     empty partition, or nothing ever removed from its front).
//   - While reading: a reader that falls below the log start fails with
//     ErrPositionGone. One whose log was truncated under it fails with
//     ErrPositionUnknown: the broker answers out of range and the fresh
//     bounds show the reader's next offset at or beyond the end (or back
//     inside a log written again), the client detects the truncation by
//     leader epoch, or the topic ID changed (a recreated topic; franz-go
//     reports it about 10 s after the recreation). These errors are final
//     for the reader: every later Fetch returns the same error, and
//     records fetched after it are never returned. The client never
//     resets silently (NoResetOffset). A recreated topic that already
//     holds more records than the checkpoint cannot be told from the old
//     one by offsets; it is by its topic ID: StreamID
//     (brokers.StreamIdentifier) is the ID in hex, drover records it with
//     every checkpoint it resets or resolves, and Open refuses a start
//     recorded against another ID with ErrPositionUnknown. On a broker
//     without topic IDs (before 2.8) StreamID is "" and Open accepts it.
//   - Carried: key, value, headers in order, the record timestamp; a record
//     with a key and a null value is a Tombstone. Result.Lag is the LSO
//     (the high watermark when read_uncommitted) minus the offset the next
//     fetch starts at: 0 for a reader at the end, markers included.
//     Result.Oldest is the timestamp of the next record when the client
//     has it buffered already (no request is made for it); otherwise zero,
//     and drover takes the last record returned as its bound
//     (actors.Lag). Timestamps are the records' own: CreateTime is the
//     producer's clock, LogAppendTime the broker's.
//   - Committed (commit_to_group) commits the offset the next fetch starts
//     at, so that broker-side lag tools (which count from the high
//     watermark) show 0 for a partition drover read to its end. The rule:
//     when position is the last record a reader of the partition returned,
//     the commit is the offset after the control records the reader has
//     stepped past since (a transaction's commit or abort marker, and
//     aborted records a read_committed reader never sees); otherwise it is
//     position+1. A reader steps past the markers its client already holds
//     before Fetch returns, and a read_committed fetch holds a
//     transaction's records together with its marker, so the commit after
//     a transaction is past its marker. A marker not yet fetched when the
//     commit is made (read_uncommitted, where the marker can come long
//     after the records) is counted from the next commit on.
//   - Errors leave the package as *brokers.Error (Retryable decided here:
//     Kafka's own retriable flag, connection errors retryable, TLS and
//     authentication failures not) or as the caller's ctx.Err(); no
//     franz-go type is visible outside.
//   - Secrets: the SASL password is a brokers.Secret: never logged, and
//     every way of printing a Config shows it "[redacted]".
//
// # Clients and goroutines
//
// A Stream reads every partition it opens through one franz-go client,
// shared by its readers (issue 12: a client per partition meant 1,000
// clients, some 3,000 connections and as many metadata refreshes and fetch
// loops for 1,000 partitions). Open adds the partition to the client
// (AddConsumePartitions) at the offset it resolved; Reader.Close removes
// it (RemoveConsumePartitions) and returns once nothing fetched for it can
// reach a later reader of the same partition. One goroutine per Stream
// polls the client and routes each partition's records and errors, in the
// client's order, into that reader's buffer; an error about one partition
// reaches its reader only, and one about the whole topic (or no topic)
// reaches every reader. A client consumes a partition at most once, so a
// second reader of a partition whose first is still open gets a client of
// its own, closed with it. The first client stays until Stream.Close. A
// further client, owned by the Stream, does metadata, offset listing and
// group commits; callers that ask for metadata while a request runs share
// the next one (see metaQueue), and offsets are listed for one partition
// at a time.
//
// Back-pressure: a reader's buffer holds about one batch (the max of its
// last Fetch; one fetch response before the first). When it holds that
// many records the partition is paused in the client
// (PauseFetchPartitions), which then drops what it fetches of it and
// fetches it again from the same offset when Fetch has taken the buffer
// below a batch and resumed it. A unit that does not fetch therefore holds
// at most a batch and one fetch response of its partition, and never
// stalls the other partitions.
// Fetch requests wait at most 250 ms at the broker, so that a partition
// added or resumed while a fetch to its broker is in flight is fetched
// soon; that costs a few empty fetches a second per broker, not per
// partition.
//
// The client keeps control records (kgo.KeepControlRecords) so that the
// reader sees where the next fetch starts; Fetch never returns them. When
// Fetch reaches max it also takes the control records at the head of its
// buffer: they are stepped past, and the first data record stays for the
// next Fetch.
//
// Fetch runs on the caller's goroutine (an exec job): it takes from the
// buffer and waits, up to wait, for the poll loop to push more, so
// cancellation returns at once with ctx.Err(), and Stream.Close from
// another goroutine ends it with brokers.ErrClosed. A Reader is also a
// brokers.Waker: the poll loop calls a Wake arrangement when it pushes
// into the empty buffer. Stream.Close closes the clients and returns after
// their goroutines, the poll loops and any metadata request have stopped.
package kafka
