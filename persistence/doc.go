// Package persistence defines drover's store: leases with fencing tokens, the
// fenced apply that writes a batch's records, deletions, dead letters, dedupe
// ids and checkpoint in one transaction, dead-letter management and quality
// windows. Implementations live in subpackages: postgres (pgx), sqlite
// (modernc.org/sqlite, the embedded default) and memory (tests and the
// testkit); storetest is the conformance suite all of them pass.
//
// # Guarantees every Store gives
//
//   - A lease's token strictly increases every time Acquire succeeds, so a
//     node that lost its lease cannot commit: Apply with a token other than
//     the unit's current one commits nothing and returns ErrLeaseLost.
//   - Apply is atomic: all of a batch or none of it.
//   - Within a batch the last operation on a key wins; an upsert whose
//     document equals the stored one does not rewrite it (updated_at stays).
//   - A checkpoint only moves forward.
//   - With Batch.Dedupe, an operation whose message id is already in the
//     dedupe table is not applied again; its id is reported in
//     Applied.Duplicates.
//   - Lease expiry is judged by the store's clock, not the caller's.
//
// # Goroutines and blocking
//
// Every method may block on I/O and honours ctx. Stores are safe for
// concurrent use and start no goroutines that outlive Close.
package persistence
