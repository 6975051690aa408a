// Package nats reads NATS JetStream in both of drover's shapes, on nats.go's
// jetstream package. No nats.go type is visible outside it: client errors
// become *brokers.Error (Retryable set for connection loss, timeouts and
// server 5xx answers) or the brokers sentinels, and messages become
// brokers.Message.
//
// # Queue: a durable pull consumer
//
// NewQueue binds to the durable consumer QueueConfig.Durable on
// QueueConfig.Stream, creating it when missing (explicit acks, AckWait,
// MaxAckPending, FilterSubjects, no delivery cap) or updating those settings
// when they differ; BindOnly leaves a consumer managed elsewhere alone.
// Every slot's Receiver pulls from that one consumer, so the server hands
// each message to one receiver at a time.
//
//   - Message.ID = Position = "<stream>:<created>:<stream sequence>", the
//     dedupe id, where created is the creation time of the stream that
//     stored it (StreamInfo.Created, Unix nanoseconds, UTC). A stream deleted and
//     created again under the same name starts its sequences at 1 again;
//     its creation time keeps the IDs of its messages apart from every
//     earlier one, so the dedupe table does not drop them. The ID is
//     stable across redeliveries and drover restarts. Deliveries = the
//     server's delivery count, Time = the time the stream stored the
//     message, Handle = the jetstream.Msg.
//   - Which life of the stream a message came from: NewQueue reads the
//     stream info; a message stored (by its server stamp) at or before the
//     last message the latest stream info showed belongs to a life already
//     known, the newest created at or before its stamp. A receive whose
//     batch holds a newer message reads the stream info again before
//     naming it (one request per such batch, shared by concurrent
//     receivers; a backlog needs one): so a recreation is noticed even by
//     a node that saw no error, because another node made the consumer
//     again. This assumes the servers' clocks agree to better than the
//     time between a stream's deletion and its successor's first message.
//     When that stream info cannot be read, the batch is given back (NAK)
//     and Receive fails, retryable.
//   - When a pull finds no consumer (deleted with its stream or alone, or
//     no responder for its pull subject), the next Receive binds again as
//     NewQueue does, making the consumer when missing (not with BindOnly);
//     one made for a stream created again delivers all of its messages
//     whatever Start says. While the stream is missing, Receive fails with
//     a non-retryable error naming it.
//   - Upgrade note: IDs before this format were "<stream>:<sequence>"; a
//     message applied but not acked when a node is upgraded comes back
//     under the new ID and is applied again.
//   - Ack sends explicit acks and returns once the server has received them
//     (a flush: one round trip per batch), so an ack that returned nil is
//     not lost with a connection that drops right after; with DoubleAck,
//     once the server confirmed each one. The runtime acks only after the
//     store committed. An ack that fails makes the message come back; the
//     dedupe table refuses it.
//   - Nack(delay) is a NAK with that delay (0: at once). Extend(d) is an
//     in-progress ack, which restarts AckWait; for d beyond AckWait the
//     receiver repeats it every AckWait/3 on its own goroutine until d has
//     passed or the message is acked or nacked.
//   - Lag is the consumer's count of messages not yet delivered (from the
//     last message's metadata; after an empty receive, from consumer info).
//     Oldest dates the first of them: after a receive that delivered
//     messages, by the newest delivered the first time (the consumer
//     delivers in stream order, so the next is no older: lag_seconds errs
//     high by at most the gap between two messages, at no extra call);
//     after an empty receive with messages waiting (a consumer at its
//     max_ack_pending), by that message's own time, read from the stream
//     (with several filter subjects the server cannot find it: zero).
//
// # Stream: ordered reads with drover keeping the position
//
// A partition is a subject filter: StreamConfig.Subjects when set,
// otherwise the stream's own subjects as the server lists them at each
// Partitions call (a subject added to the stream is a new partition; a
// stream without subjects, such as a mirror, is one partition ">"). The
// subjects of one stream never overlap (the server refuses that), so each
// message belongs to one partition. The partition ID is the filter itself:
// "orders.eu" gives the unit "<source>/orders.eu".
//
// Positions are stream sequences in decimal, increasing within a partition
// (with gaps where other subjects' messages are). Open after a position
// reads from the next sequence; At from the first message the stream
// stored at or after that time (a consumer with DeliverByStartTime);
// Earliest from the oldest message held; Latest from the stream's last
// sequence + 1 at Open.
//
// Stream implements brokers.Resolver from the stream's state at the call:
// Latest is Start{After: last sequence}, Earliest Start{After: first
// sequence - 1} once messages were removed from the stream's front; both
// are Start{Mode: Earliest} while there is nothing to name (nothing ever
// stored, or nothing removed). Sequences are the stream's, so one
// subject's start is named in them too.
//
// ErrPositionUnknown: a stream deleted and created again under the same
// name counts its sequences from 1 again. Open after a position beyond the
// stream's last sequence fails with ErrPositionUnknown (a non-retryable
// *brokers.Error naming stream, subject, the position and the last
// sequence). A reader that makes its consumer again (see below) first
// compares the stream's creation time with the one at Open and fails the
// same way when the stream was created again meanwhile, wherever its
// position lies. A checkpoint from an earlier life of the stream that is
// not beyond the new one's end cannot be told from one of its own at Open
// (positions are bare sequences) and is read after.
//
// A Reader reads through an ephemeral pull consumer of its own (no acks,
// kept in server memory, removed by the server after InactiveThreshold
// without fetches if the process dies). The Reader, not the consumer, owns
// the position: whenever a delivery may have gone astray (an error, a
// cancelled or abandoned wait, a reconnect, a server restart that dropped
// the consumer) it deletes the consumer and makes a new one that starts at
// its next sequence, and it drops any message below that sequence. So a
// reader goes on without loss or duplicates across connection loss and
// server restarts.
//
// ErrPositionGone: when the partition is the whole stream (its only
// subject, or ">"), the stream's sequences have no gaps except deleted
// messages, and the reader reports ErrPositionGone exactly: at Open when
// the stream's first sequence is past After+1, and in Fetch when the next
// message skips sequences that retention or a purge deleted before they
// were read. For one subject of a stream with several, JetStream does not
// say which subjects deleted messages belonged to; a gap is then taken as
// other subjects' messages and loss through retention is NOT detected. Give
// a source whose retention may overtake its readers a stream of its own.
//
// # Fetch and Receive: max and wait
//
// Both pull in up to three requests: a request for max messages that
// answers at once with what the consumer has (a no-wait request for a
// stream reader; for a queue, a request the server ends after 5 ms,
// because at MaxAckPending the server leaves a no-wait request unanswered
// and the client would wait a second for it); when that is empty and
// wait > 0, a request for one message that the server holds until one
// arrives or about 90% of wait has passed (so a call returns a little
// before wait when nothing comes); when one arrives, a no-wait request for
// the rest. A call returns as soon as messages are there, with ctx.Err()
// at once when ctx ends, with a retryable error when the connection drops
// during the wait, and with brokers.ErrClosed when the queue, stream,
// receiver or reader is closed.
//
// # Connection
//
// One NATS connection per Queue or Stream, shared by its receivers or
// readers. nats.go reconnects on its own (ReconnectWait, MaxReconnects, 0:
// forever); while it is down, calls fail at once with a retryable
// *brokers.Error, and after it is back they work again. Credentials are
// User/Password, Token or CredsFile; they never appear in logs or errors
// (Password and Token are brokers.Secrets, which never print; URLs with
// credentials are refused).
//
// # The config file's section
//
// SourceConfig is the nats section of a node's config file, one for both
// shapes: the connection settings (a URL list, a brokers.SecretURL, with
// any credentials written in it moved to their own fields by Conn), the
// stream, and the queue's settings. Its Validate names problems by the
// file's paths; QueueConfig and StreamConfig give the configs NewQueue and
// NewStream take.
//
// # Goroutines
//
// nats.go runs its connection goroutines (reader, flusher, callbacks) and
// one goroutine per pull request; Close closes the connection, which ends
// them. A Receiver that extends a message beyond AckWait runs one goroutine
// that it stops and waits for in Close. Nothing else starts goroutines.
package nats
