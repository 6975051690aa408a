// Package bench is `drover bench`: it measures, in one run and on one
// machine, how fast drover applies a preloaded Kafka topic to its store and
// how that compares with what the store itself can take.
//
// The figures (Run prints one line each, then a last line with all of them):
//
//   - drover: a node (in this process, or Options.Nodes node processes of
//     Options.Binary) consumes a topic preloaded into an in-process kfake to
//     its end. The time runs from the node's start to the first poll of the
//     store (every 10 ms) that finds every partition's checkpoint at its
//     last offset; the records table is then read back and every key must
//     hold the last document produced for it.
//   - ceiling: the same messages, decoded before the clock starts (by
//     actors/decode, as drover decodes them), cut per partition into
//     batches of Options.Batch, folded, and written with the store's own
//     SQL into a table of the same shape plus a checkpoint row per batch.
//     PostgreSQL: Options.CeilingWorkers (12) concurrent workers, each batch
//     one pipelined `unnest` upsert + checkpoint (one implicit transaction).
//     SQLite: one connection, one immediate transaction per batch, a
//     prepared upsert per row that skips unchanged documents, then the
//     checkpoint.
//   - loop: a plain franz-go consumer of the same topic (one client, direct
//     partition reads), encoding/json decoding, batches cut per partition as
//     drover cuts them (batch size or max_wait), written by the ceiling's SQL
//     and workers (partition p always by worker p mod workers, so per
//     partition order holds).
//   - latency: with the drover node still running, messages are produced at
//     Options.Rate (default half the drover figure) for Options.LatencyFor,
//     each with its record timestamp taken just before it is handed to the
//     producer. A poller reads the checkpoints every 5 ms; a message's
//     latency is the time of the first poll that finds its partition's
//     checkpoint at or past its offset, minus its timestamp: an upper bound
//     of publish → commit, by at most one poll interval and one query.
//
// ComparePartitions runs the drover figure again at each partition count
// (fresh topic, fresh tables) and prints the ratio of the last to the
// first. Idle measures a node process with many idle units (see idle.go).
//
// It is a harness, not part of the runtime: like cluster/demo it talks to
// Kafka (franz-go, kfake), PostgreSQL (pgx) and SQLite (database/sql)
// directly. Run owns every goroutine and process it starts and waits for
// them before it returns.
package bench
