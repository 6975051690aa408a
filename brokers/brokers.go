package brokers

import (
	"context"
	"fmt"
	"time"
)

// Header is one message header, in the order the broker gave it.
type Header struct {
	Key   string
	Value []byte
}

// Message is one message as a broker delivered it, before decoding.
// The slices belong to the receiver once Fetch or Receive returns them.
type Message struct {
	// Position orders the message within its partition (streams). For queue
	// messages it equals ID.
	Position string
	// ID is the broker's message id that survives redelivery (queues: SQS
	// MessageId, Pub/Sub message id, JetStream
	// "<stream>:<stream created, Unix ns>:<sequence>"). It is the dedupe id,
	// unique across incarnations of the queue. Empty for streams.
	ID string
	// Key is the message key (Kafka key, Kinesis partition key, a queue's key
	// attribute), nil when there is none.
	Key []byte
	// Value is the body.
	Value []byte
	// Tombstone is set for a keyed message with no value (a Kafka tombstone):
	// it deletes its key.
	Tombstone bool
	Headers   []Header
	// Time is the broker's timestamp of the message, zero when unknown.
	Time time.Time
	// Deliveries counts deliveries of a queue message, 1 the first time; 0
	// when the broker does not say.
	Deliveries int
	// Reject, when not empty, says that the adapter could not make a
	// message of what the broker held (a Kinesis KPL aggregate whose
	// checksum or protobuf is corrupt): drover dead-letters it as it is,
	// with Reject as the reason, without decoding it.
	Reject string
	// Handle is the adapter's acknowledgement handle (receipt handle, ack
	// id, JetStream message). Only the Receiver that returned it reads it.
	Handle any
}

// Result is what one Fetch or Receive returned.
type Result struct {
	// Messages in partition order (streams) or delivery order (queues).
	Messages []Message
	// End is set by a stream reader when its partition is closed and every
	// message has been returned (a Kinesis shard after a split or merge).
	// No further Fetch on this reader returns messages.
	End bool
	// Lag is how many messages the reader is behind the newest one after
	// this fetch (the messages not returned yet), or -1 when the broker
	// cannot say. It is always a count of messages; 0 means caught up.
	Lag int64
	// Oldest is the broker's time of the oldest message not returned yet
	// after this fetch (a stream: the next one; a queue: the oldest
	// waiting for delivery), when the adapter knows it; zero when it does
	// not. It is ignored when Lag is 0 (nothing is left). drover measures
	// lag_seconds from it against the node's clock (actors.Lag).
	Oldest time.Time
}

// Partition is one partition (Kafka), shard (Kinesis) or ordered stream
// (JetStream) of a Stream.
type Partition struct {
	// ID is the partition's name within its stream, e.g. "3" or
	// "shardId-000000000002". drover's unit id is "<source>/<ID>".
	ID string
	// Parents are the partitions this one was split or merged from
	// (Kinesis). A partition is read only after each parent is read to its
	// end.
	Parents []string
}

// StartMode says where a reader starts when it has no position.
type StartMode int

const (
	// Earliest starts at the oldest message the broker still holds.
	Earliest StartMode = iota
	// Latest starts after the newest message at the time the reader opens.
	Latest
)

// String is "earliest" or "latest", as the configuration spells them.
func (m StartMode) String() string {
	switch m {
	case Earliest:
		return "earliest"
	case Latest:
		return "latest"
	}
	return fmt.Sprintf("StartMode(%d)", int(m))
}

// Start says where a Reader begins.
type Start struct {
	// After is the last position already applied; the reader returns the
	// messages after it. Empty means use At, then Mode.
	After string
	// At, when not zero and After is empty, starts at the first message
	// the broker stamped at or after At: a start resolved by a broker that
	// cannot name its newest position (Kinesis LATEST).
	At   time.Time
	Mode StartMode
	// StreamID, when not empty, is the stream incarnation After (or At)
	// was recorded against (StreamIdentifier). A stream that knows its
	// identity and finds another refuses the start with ErrPositionUnknown:
	// the stream was deleted and created again since, and the position,
	// even one the new stream holds, is of the old one.
	StreamID string
}

// StreamIdentifier is implemented by streams whose broker names each
// incarnation of a stream, so that one deleted and created again under the
// same name is told from the old one (a Kafka topic ID). StreamID returns
// that name for the stream partition belongs to, or "" when the broker
// has none (Kafka before 2.8).
type StreamIdentifier interface {
	StreamID(ctx context.Context, partition string) (string, error)
}

// Resolver is implemented by streams that turn a start mode into a
// concrete Start of one partition, so that drover can record where a unit
// began before it reads anything (architecture §7: start is resolved once). The
// result is one of
//   - Start{After: p}: p is the position of the last message before the
//     start (Kafka Latest: the high watermark - 1);
//   - Start{At: t}: the first message stamped at or after t, for brokers
//     that cannot name their newest position; t must not be later than the
//     broker's own time of the call (no message written after Resolve
//     returns may be skipped);
//   - Start{Mode: Earliest}: the very beginning of the partition, when no
//     message was ever removed from its front (nothing to name before it).
//
// Resolve never returns a start after a message that was written before
// it was called and is meant to be read: for Earliest that is every
// message still held.
type Resolver interface {
	Resolve(ctx context.Context, partition string, mode StartMode) (Start, error)
}

// Stream is a partitioned, ordered log. Safe for concurrent use.
type Stream interface {
	// Partitions lists the stream's partitions, closed ones included.
	Partitions(ctx context.Context) ([]Partition, error)
	// Open returns a reader of one partition positioned at start.
	Open(ctx context.Context, partition string, start Start) (Reader, error)
	// Close releases the stream and everything opened from it.
	Close() error
}

// Reader reads one partition in order. A Reader is used by one goroutine at
// a time.
type Reader interface {
	// Fetch returns up to max messages, waiting at most wait for the first
	// one. It returns early, with what it has, as soon as messages arrive.
	// An empty Result with a nil error means nothing arrived in time.
	Fetch(ctx context.Context, max int, wait time.Duration) (Result, error)
	// Close releases the reader.
	Close() error
}

// Queue hands messages to competing receivers. Safe for concurrent use.
type Queue interface {
	// Open returns a receiver for one consumer slot (e.g. "slot-0").
	Open(ctx context.Context, slot string) (Receiver, error)
	// Close releases the queue and everything opened from it.
	Close() error
}

// Receiver receives, acknowledges and gives back messages. A Receiver is
// used by one goroutine at a time.
type Receiver interface {
	// Receive returns up to max messages, waiting at most wait for the first.
	// The messages stay invisible to other receivers until acked, nacked, or
	// their ack deadline passes.
	Receive(ctx context.Context, max int, wait time.Duration) (Result, error)
	// Ack removes messages for good. Call it only after the store committed
	// them. A failed ack is harmless: the message comes back and the dedupe
	// table refuses it.
	Ack(ctx context.Context, msgs []Message) error
	// Nack gives messages back to be delivered again after delay (0: as soon
	// as the broker can).
	Nack(ctx context.Context, msgs []Message, delay time.Duration) error
	// Close releases the receiver; unacknowledged messages come back later.
	Close() error
}

// Extender is implemented by receivers that can push back the ack deadline
// of messages still being applied (SQS ChangeMessageVisibility, Pub/Sub
// ModifyAckDeadline, JetStream in-progress).
type Extender interface {
	Extend(ctx context.Context, msgs []Message, d time.Duration) error
}

// Committer is implemented by streams that can also record drover's
// position in the broker (Kafka's commit_to_group), so that broker-side lag
// tools see drover's progress. drover calls it after the store committed,
// at most about once a second per partition, and never reads it back: the
// store's checkpoint stays the truth.
type Committer interface {
	Committed(ctx context.Context, partition, position string) error
}

// Waker is implemented by a Reader or Receiver that can tell when a Fetch
// (Receive) may return messages without a goroutine parked per idle unit:
// Wake arranges for f to be called once, from any goroutine, as soon as
// messages may be available — at once if some already are — and returns a
// function that cancels the arrangement. A spurious call is allowed; a
// missed one is not.
type Waker interface {
	Wake(f func()) (cancel func())
}
