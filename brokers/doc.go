// Package brokers defines the two shapes of message source drover reads, and
// the errors adapters return. Adapters live in subpackages (memory, kafka,
// kinesis, sqs, pubsub, nats) and return concrete types; no package outside
// an adapter sees its client library's types.
//
// # Streams
//
// A Stream (Kafka topic, Kinesis stream, JetStream stream read in order) is a
// set of partitions. drover keeps each partition's position in its own store;
// the broker keeps none for it (no consumer group, no KCL lease table). A
// Reader reads one partition in order from a Start.
//
// # Queues
//
// A Queue (SQS queue, Pub/Sub subscription, JetStream durable pull consumer)
// hands messages to competing receivers. drover opens one Receiver per
// consumer slot, stores each message together with its ID in a dedupe table,
// and acknowledges only after the store committed.
//
// # Positions
//
// A position is an opaque string that is totally ordered within its
// partition. Every stream adapter uses unsigned decimal integers (Kafka
// offsets, Kinesis sequence numbers, JetStream stream sequences), or
// sub-positions "<decimal>/<decimal>" for the user records of a Kinesis KPL
// aggregate (SubPosition), so ComparePositions orders them without knowing
// the broker. A message an adapter could not read (a corrupt aggregate)
// carries Message.Reject and is dead-lettered with it.
//
// A seek (drover seek) names a target: a position, earliest, latest, a
// time or after:<position> (ParseSeekTarget). SeekStart turns it into the
// Start to open and checkpoint, with the optional Resolver, Seeker and
// FromSeeker where the stream has them; a sub-position target only on a
// SubPositioner (Kinesis, memory).
//
// # Blocking and goroutines
//
// Fetch and Receive may block up to their wait argument and must return
// promptly, with ctx.Err(), when ctx is cancelled. Callers run them through
// an exec.Executor, never on an actor's mailbox. Adapters own any goroutines
// they start and stop them in Close; Close releases everything.
package brokers
