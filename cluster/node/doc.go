// Package node wires one production drover node from its configuration:
// the store, each source's broker, memberlist membership, the actor system
// on real clock, goroutine dispatcher and executor, Prometheus metrics and
// the debug endpoint.
//
// Queue deadlines: each queue source's actors.SourceSpec.AckDeadline is
// what its configuration says the broker's deadline is (SQS
// visibility_timeout, NATS ack_wait, both 30 s when unset; Pub/Sub 10 s,
// the service's shortest subscription ack deadline), and the unit extends
// the deadline of the batch in flight every third of it. The SQS adapter
// asks for that timeout on every receive, so the queue's own attribute does
// not cut it short. The slow-handler
// tests (e2e_slowq_test.go) hold a batch for three deadlines on fauxqs,
// pstest and an embedded JetStream server and check that every message is
// applied once, delivered once, and acked.
//
// A broker that is down does not stop the node. Start validates every
// source's configuration (a config error fails it) but connects to no
// broker: Kafka's client connects on first use, and NATS, Pub/Sub, SQS and
// Kinesis sources are opened by the first call that needs them (lazy.go),
// and again by each later call until an open succeeds. The runtime makes
// those calls and retries them with its backoff, so the failure shows in
// the tree: a stream source is retrying with the broker's error
// (discovery), a queue source's units are retrying with it (their open).
// The first failed open is logged at WARN, the broker reached again at
// INFO (TestSourcesStartWhileTheirBrokerIsUnreachable).
//
// Goroutines: Start starts the executor's jobs, memberlist's goroutines
// (owned by package gossip), the debug server and two housekeeping
// goroutines (store health, dedupe pruning); Shutdown and Close stop all of
// them and wait.
package node
