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
// Partition.Parents name them, like a Kinesis reshard. Trim drops old
// messages so that reading after a trimmed position fails with
// brokers.ErrPositionGone.
//
// # Queue
//
// Message ids are "m-1", "m-2", ... in Send order, used as both ID and
// Position. Receive hands out the oldest messages that are neither in flight
// nor delayed, each in flight until its ack deadline (judged by the clock at
// each call, so a virtual clock moving past it makes it deliverable again with
// Deliveries+1). Only the latest delivery of a message can be acked, nacked
// or extended: a late ack from a receiver whose deadline passed and whose
// message went to someone else is ignored, as the dedupe table makes it
// harmless.
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
