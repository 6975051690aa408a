// Package node wires one production drover node from its configuration:
// the store, each source's broker, memberlist membership, the actor system
// on real clock, goroutine dispatcher and executor, Prometheus metrics and
// the debug endpoint.
//
// Queue deadlines: each queue source's actors.SourceSpec.AckDeadline is
// what its configuration says the broker's deadline is (SQS
// visibility_timeout, NATS ack_wait, both 30 s when unset; Pub/Sub 10 s,
// the service's shortest subscription ack deadline), and the unit extends
// the deadline of the batch in flight every third of it. The slow-handler
// tests (e2e_slowq_test.go) hold a batch for three deadlines on fauxqs,
// pstest and an embedded JetStream server and check that every message is
// applied once, delivered once, and acked.
//
// Goroutines: Start starts the executor's jobs, memberlist's goroutines
// (owned by package gossip), the debug server and two housekeeping
// goroutines (store health, dedupe pruning); Shutdown and Close stop all of
// them and wait.
package node
