// Package pubsub reads a Google Cloud Pub/Sub subscription as a drover
// queue, on the v2 client's generated API (apiv1 SubscriptionAdminClient,
// pubsubpb). No client, gRPC or protobuf type is visible outside it: errors
// become *brokers.Error (Retryable for Unavailable, DeadlineExceeded,
// ResourceExhausted, Aborted, Internal, Unknown; not for NotFound,
// PermissionDenied, InvalidArgument and the like) or brokers.ErrClosed.
//
// # Data path: unary Pull, Acknowledge, ModifyAckDeadline
//
// A Receiver uses the unary Pull RPC, not StreamingPull: the emulator
// (pstest) streams about 100 messages a second per stream, while unary
// Pull and Acknowledge move a thousand in about 11 ms (NOTES.md), and a
// unary call fits drover's "fetch up to max, waiting at most wait" better
// than a stream that pushes messages nobody asked for yet.
//
//   - Message.ID = Position = the Pub/Sub message id (stable across
//     redeliveries: the dedupe id). Key = the ordering key, or else the
//     Config.KeyAttribute attribute ("key"). Headers = the attributes,
//     sorted by name. Time = the publish time. Deliveries = the delivery
//     attempt when the service counts it (only on subscriptions with a
//     dead-letter policy), else 0. Handle = the ack id of this delivery.
//   - Ack = Acknowledge, called by the runtime only after the store
//     committed. Nack(delay) = ModifyAckDeadline to delay (0: deliver again
//     at once). Extend(d) = ModifyAckDeadline to d. Deadlines are whole
//     seconds (rounded up), at most MaxAckDeadline (600 s).
//   - Lag is -1 and Oldest is not set (lag_seconds -1): Pull tells
//     neither the backlog nor the age of the oldest unacked message;
//     Pub/Sub publishes those only as Cloud Monitoring metrics
//     (subscription/num_undelivered_messages and
//     subscription/oldest_unacked_message_age), which pstest does not
//     serve. Autoscale a Pub/Sub source on them (KEDA's gcp-pubsub
//     scaler).
//
// # Waiting
//
// A Pull is sent with return_immediately set, so it answers at once, empty
// when nothing is there (pstest does so; the real service's own wait is
// unbounded from the caller's side and a Pull cut short by a deadline may
// lose messages to the ack deadline). When it is empty and the wait is not
// used up, the receiver pauses through exec.Wait — 5 ms, doubling up to
// Config.PollInterval (100 ms) — and pulls again. So a Receive returns
// within one pause and one round trip of messages arriving, at most about
// one round trip after wait when none do, and at once with ctx.Err() when
// ctx ends. Under an executor that controls time, exec.Wait records a
// pause and returns at once; the receiver sees that, records the rest of
// the wait in one more exec.Wait and pulls one last time, so it never
// spins.
// The real service discourages return_immediately for throughput; a
// subscriber that is busy gets full Pulls and never pauses.
//
// # Ordering
//
// The adapter does not reorder: a Receive returns messages in the order of
// the Pull response. On a subscription with message ordering enabled the
// service delivers the messages of one ordering key in publish order, and
// pstest hands out only the oldest unacknowledged message of a key, so a
// key is held by one slot until that message is acked. What a slot gets is
// therefore "per key in publish order, while nothing is nacked or expires":
// a nacked or expired message is delivered again after later messages of
// its key may already have been applied by another slot. Exactly-once
// application is kept by the dedupe table either way; strict per-key order
// across failures needs a stream source.
//
// # Connection
//
// Config.Endpoint with Insecure talks to an emulator without TLS or
// authentication; with Endpoint empty and PUBSUB_EMULATOR_HOST set, the
// client library does the same for that address. Otherwise Application
// Default Credentials, or Config.CredentialsFile (whose contents are never
// logged; only its "type" field is read here, to pick the loader). The
// client's own retries are turned off for the data-path calls: a lost
// connection fails the call with a retryable error and gRPC reconnects on
// the next one.
//
// # Goroutines
//
// The adapter starts none; gRPC runs the connection's goroutines, and
// Queue.Close closes the client, which ends them.
package pubsub
