// Package memory is an in-memory broker of both shapes: a Stream (partitioned
// log with resharding) and a Queue (competing receivers with ack deadlines),
// with fault injection. The testkit's deterministic simulator, the demo and
// unit tests use it in place of a real server.
//
// # Guarantees
//
//   - Deterministic: the package starts no goroutines, uses no randomness and
//     reads time only from the injected clock.Clock (nil means clock.Real{}).
//     The same sequence of calls with the same clock readings gives the same
//     results, message for message.
//   - Every wait (a Fetch or Receive with nothing to return, an injected
//     Delay) goes through exec.Wait / exec.Pause. Under an executor that
//     controls time (the testkit) the wait is recorded and returns at once;
//     on the wall clock a Fetch or Receive returns early as soon as data
//     arrives, and promptly with ctx.Err() when ctx is cancelled.
//   - Safe for concurrent use: one mutex per Stream or Queue guards all of
//     its state; no call holds it while waiting.
//   - Slices in returned messages are copies: the caller owns them. Produce
//     and Send copy what they are given too.
//
// # Stream
//
// Partitions are named "0", "1", ... in creation order; positions are
// decimal offsets "0", "1", ... per partition, like Kafka. Split and Merge
// close their parents (a reader of a closed partition gets its remaining
// messages, the last batch with Result.End set) and create children whose
// Partition.Parents name them, like a Kinesis reshard. Forget removes a
// closed partition from the listing with its messages, as Kinesis drops a
// closed shard aged past retention; its children keep naming it. Trim drops
// old messages so that reading after a trimmed position fails with
// brokers.ErrPositionGone. An id is never reused within an incarnation.
//
// ProduceAggregate writes several messages as one record at one offset, as
// the KPL aggregates user records into one Kinesis record: they are read at
// sub-positions "<offset>/<index>", at most max per Fetch, and a reader
// opened after a sub-position resumes inside the aggregate (after the
// offset itself, after the whole aggregate; after a sub-position the
// record does not have, a plain record's or past the aggregate's end,
// its first Fetch fails with brokers.ErrPositionUnknown). Lag counts the user records
// left of an aggregate begun, one per record otherwise.
//
// Starts: Open reads after Start.After, else from the first message stamped
// at or after Start.At, else from the last stable offset (Latest) or the
// oldest message held (Earliest). The Stream and its clients implement
// brokers.Resolver: Latest resolves to Start{After: LSO-1}, Earliest to
// Start{After: first held - 1}, either to Start{Mode: Earliest} when nothing
// lies before it, so that a resolved start skips nothing written after
// Resolve (Latest) or still held (Earliest). Starts never drop silently: a
// start before the oldest message held (After a trimmed position, At a time
// no later than a trimmed message's) fails with brokers.ErrPositionGone, one
// after a position beyond the partition's end with
// brokers.ErrPositionUnknown, both in a non-retryable *brokers.Error.
//
// Recreate deletes the stream and creates it again (a topic or stream
// deleted and created with the same name): as many partitions as were open,
// "0".."n-1", no parents, no messages, offsets from 0. Readers opened before
// fail on their next Fetch, not retryable, with brokers.ErrPositionUnknown
// (brokers.ErrUnknownPartition for an id the new stream lacks), as a client
// that tells incarnations apart reports it. A new Open cannot tell an old
// offset from a new one, as on Kafka without topic ids: after one beyond
// the new end it fails with ErrPositionUnknown, after one below it reads on.
//
// Readers implement brokers.Waker: Wake calls its function once a Fetch may
// return something (a message below the last stable offset, the end of a
// closed partition, an error, an injected fetch failure), at once when one
// already may, on the goroutine that made the change and with the stream's
// lock held; the calls of one change come in the order of the
// arrangements, so a run stays deterministic. The Queue's receivers do not
// implement it: a message whose ack deadline passes becomes deliverable
// with no call to the queue that could wake anyone.
//
// Transactions (BeginTx, Tx.Produce, Tx.Commit, Tx.Abort) are seen as by
// Kafka's read_committed consumers. A transaction's records take their
// offsets at once but readers stop at the last stable offset (LSO), the
// first offset of the oldest open transaction, so later messages wait until
// it ends. Commit and Abort each write a control marker taking one offset;
// readers step over markers and aborted records (returned positions have
// gaps) and return committed records in place. Result.Lag counts offsets
// from the reader's position to the LSO, and Result.Oldest is the Time of
// the next readable record (none at the LSO). A queue's Lag counts the
// messages neither acked nor in flight (nacked ones included) and its
// Oldest is the earliest Time among them. Split and Merge abort the open
// transactions of the partitions they close; Trim never removes records at
// or past the LSO.
//
// # Queue
//
// Message ids are "m-1", "m-2", ... in Send order, used as both ID and
// Position. They are the queue's own and never reused, not even across
// Recreate (which empties the queue while receivers go on), as SQS and
// Pub/Sub ids are unique to the broker. Receive hands out the oldest messages that are neither in flight
// nor delayed, each in flight until its ack deadline (judged by the clock at
// each call, so a virtual clock moving past it makes it deliverable again with
// Deliveries+1). Only the latest delivery of a message can be acked, nacked
// or extended: a late ack from a receiver whose deadline passed and whose
// message went to someone else is ignored, as the dedupe table makes it
// harmless. Extend keeps a delivery in flight as long as each extension
// comes before its deadline; one that comes after is ignored and the
// message stays deliverable (SQS: MessageNotInflight).
//
// # Clients
//
// A Stream or Queue is the broker; NewClient returns one client's view of it
// (a brokers.Stream or brokers.Queue) whose Close releases only what was
// opened through it, as a node that stops or crashes closes its connection
// while the broker goes on for the others. The Stream and Queue also
// implement the interfaces themselves; their Close closes everything.
//
// # Fault injection
//
// FailNext makes the next n calls of an operation fail, Delay makes each call
// of an operation wait first, DropAcks makes acks report success without
// effect. Operation names are the Op* constants. Injected failures count as
// calls in order, so a scenario stays deterministic.
package memory
