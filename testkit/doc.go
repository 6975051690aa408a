// Package testkit runs a whole drover cluster — several nodes with their
// actors, simulated membership, in-memory brokers and a store — in one
// process, on ONE goroutine, in virtual time, from a seed.
//
// # Guarantees
//
//   - Determinism: the same seed and the same scenario give the same run,
//     task for task. Every mailbox run, broker or store call (a "job") and
//     timer is a task of a scheduler that picks the next ready task with
//     the seeded random source and jumps virtual time to the next pending
//     task when none is ready. Digest hashes the full trace.
//   - Nodes fail as processes do: Kill drops every task of a node (no
//     handoff), Pause holds them (a GC pause or SIGSTOP: the node resumes
//     believing it still holds its leases), Partition cuts a node off from
//     the others but not from the store and brokers, Stop is SIGTERM's
//     graceful leave. Membership notices after the detection delay.
//   - Membership is per node and forgets as memberlist does (membership.go
//     states the model): a process joins the seeds of its join list
//     (SetJoin, Config.Join; default every other node) or forms a cluster
//     of its own; a member declared dead returns by itself only as the same
//     process within 30 s; a healing loop (Config.HealEvery, NoHealing)
//     merges split memberships. Converged says when every view is right.
//   - Invariants are checked on what the store committed (an audit wrapper
//     around it records every commit and lease acquisition): nothing lost,
//     nothing applied twice (beyond exactly the re-applies an operator's
//     seek back asks for, Cluster.Seek), order per unit, one applier per lease token,
//     failover within Config.FailoverBound, no record dead-lettered for a
//     refusal the store would not repeat (RaceNext). Others are checked
//     on the running cluster (invariants.go), the nodes' trees among them
//     at the end of every virtual instant. Report lists what broke.
//   - StoreFaults inject failures the same way whatever the store (the
//     memory store or SQLite on the virtual clock), so a run gives the same
//     digest on both. Besides passing faults (which Settle clears) they
//     model what a store is: RefuseDocs a CHECK constraint that refuses
//     some documents for good (persistence.ErrPermanent), LimitBatchBytes
//     the server's limit on one batch (a transient-looking failure); Settle
//     keeps both. RaceNext is a passing refusal of a permanent class (a
//     race of concurrent DDL).
//
// RandomRun draws a whole scenario from a seed; `drover sim` runs it.
// Scale takes one large cluster (100 nodes, 20,000 units by default)
// through a cold start, a kill, a join and a rolling restart and measures
// each; `drover sim --scale` prints its table (scale.go).
// Users test their handlers' behaviour with the same Cluster: AddStream /
// AddQueue with their actors.SourceSpec, Publish, Run, faults, Settle,
// Report.
//
// # Goroutines
//
// None: a Cluster is driven by the goroutine that calls its methods, and is
// not safe for concurrent use. Separate Clusters are independent and may run
// on separate goroutines (drover sim runs seeds in parallel).
package testkit
