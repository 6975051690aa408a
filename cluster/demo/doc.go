// Package demo runs a local drover cluster on embedded parts: an in-process
// Kafka (kfake), node PROCESSES of the drover binary on loopback joined by
// real memberlist, a shared SQLite (or PostgreSQL) store, a producer of a
// realistic mix of messages, and a verifier that compares the store with
// what was produced. `drover demo` and the multi-process tests use it.
//
// It is a harness, not part of the runtime: it talks to Kafka, SQLite and
// PostgreSQL directly to produce and to verify.
//
// Its directory (Config.Dir, `drover demo --dir`) must be new, empty or a
// previous demo's, marked by the file .drover-demo that ClaimDir writes:
// the demo replaces drover.db*, node-*.yaml, node-*.log and nats/ there,
// and refuses any other directory before it removes anything.
//
// Goroutines: Start launches the node processes and, while Sample runs, a
// sampler; Close stops them all and waits.
package demo
