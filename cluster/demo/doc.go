// Package demo runs a local drover cluster on embedded parts: an in-process
// Kafka (kfake), node PROCESSES of the drover binary on loopback joined by
// real memberlist, a shared SQLite (or PostgreSQL) store, a producer of a
// realistic mix of messages, and a verifier that compares the store with
// what was produced. `drover demo` and the multi-process tests use it.
//
// Beside the JSON topic and the queues it runs a schema-registry source:
// an in-process registry (internal/srtest) holds an Avro order schema, the
// producer writes Avro orders and tombstones in the Confluent wire format
// (sr.Serde) to the topic orders_avro, and the source orders_avro decodes
// them (decode.format avro) into its table, which Verify compares with the
// last order produced per key.
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
// # Chaos
//
// Plan.Chaos is `drover demo --chaos`: while the producer runs, every 2–8 s
// one action on a random node — kill -9, SIGTERM, restart, or a cut of its
// store connections for 2–6 s — drawn from Plan.Seed (the intervals from one
// stream, the actions and nodes from another, so the times of the actions
// depend on the seed alone). At least one node process always runs; one
// store cut at a time. A cut needs Config.ProxyStore: each node reaches the
// (PostgreSQL) store through its own internal/tcpproxy proxy, run by the
// demo process, which drops the open connections and refuses new ones for
// the cut. StartPostgres starts a throwaway server from the local binaries.
// When the window ends every stopped node is restarted and every proxy
// restored; the cluster must drain, converge again and (with Verify) pass
// the verifier, whose verdict then counts the actions. A node process that
// ends without being told to is reported in Verdict.Problems.
//
// Its directory (Config.Dir, `drover demo --dir`) must be new, empty or a
// previous demo's, marked by the file .drover-demo that ClaimDir writes:
// the demo replaces drover.db*, node-*.yaml, node-*.log and nats/ there,
// and refuses any other directory before it removes anything.
//
// Goroutines: Start launches the node processes and, while Sample runs, a
// sampler; Run runs the producer, the kills and the chaos (and the
// SIGTERMs and cuts in flight) and waits for them all before it returns;
// Close stops the nodes and the store proxies and waits.
package demo
