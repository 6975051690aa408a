// Package node wires one production drover node from its configuration:
// the store, each source's broker, memberlist membership, the actor system
// on real clock, goroutine dispatcher and executor, Prometheus metrics and
// the debug endpoint.
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
