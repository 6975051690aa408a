// Package demo runs a local drover cluster on embedded parts: an in-process
// Kafka (kfake), node PROCESSES of the drover binary on loopback joined by
// real memberlist, a shared SQLite (or PostgreSQL) store, a producer of a
// realistic mix of messages, and a verifier that compares the store with
// what was produced. `drover demo` and the multi-process tests use it.
//
// Tests change the cluster's configuration through it: Config.Extra adds
// sources to every node (the reshard test's Kinesis source, which the test
// verifies itself), and AddAuditSource adds an audit source on the demo
// topic to one node's config, for a rolling change; Units, Drained and
// Verify count such a source from then on. Sampler.Watch checks that no
// unit of a source goes without a running owner for long while some node
// runs that source.
//
// It is a harness, not part of the runtime: it talks to Kafka, SQLite and
// PostgreSQL directly to produce and to verify.
//
// Goroutines: Start launches the node processes and, while Sample runs, a
// sampler; Close stops them all and waits.
package demo
