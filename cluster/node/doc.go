// Package node wires one production drover node from its configuration:
// the store, each source's broker, memberlist membership, the actor system
// on real clock, goroutine dispatcher and executor, Prometheus metrics and
// the debug endpoint.
//
// Goroutines: Start starts the executor's jobs, memberlist's goroutines
// (owned by package gossip), the debug server and two housekeeping
// goroutines (store health, dedupe pruning); Shutdown and Close stop all of
// them and wait.
package node
