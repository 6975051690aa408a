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
//   - A holder that still renews keeps its lease whatever the caller's
//     membership view says: Acquire takes over a holder absent from
//     AcquireRequest.Live only once its RenewedAt (set by Acquire, Renew
//     and RenewLeases) is at least AcquireRequest.Stale old. A released or
//     expired lease is free whatever Stale says. The store's clock is the
//     tie-breaker, so a partition cannot make nodes take a lease back and
//     forth.
//   - RenewLeases renews many leases in one round trip; a lease it can
//     neither renew nor declare lost this time (its row is locked by
//     another transaction) is left as it was.
//   - A checkpoint only moves forward, in the order of
//     brokers.ComparePositions (start markers before every position),
//     except through Batch.Reset, which writes it as given, fenced like
//     every apply.
//   - With Batch.Dedupe, an operation whose message id is already in the
//     dedupe table is not applied again; its id is reported in
//     Applied.Duplicates.
//   - InitSource records a source's initial units once; every caller,
//     concurrent ones included, gets the first caller's list.
//   - Lease expiry and staleness are judged by the store's clock, not the
//     caller's.
//   - Apply's errors say whether applying the same batch again can help:
//     one matching ErrPermanent (Permanent) means the store refuses what
//     the batch holds — a constraint a record violates, a value its column
//     refuses, a document that is not JSON, a batch over what one
//     statement carries — and wrote nothing; every other error may pass on
//     a retry. The runtime splits a permanently refused batch and
//     dead-letters the records refused alone; it retries the others whole.
//   - A dead letter records the size of its message body (PayloadBytes,
//     column payload_bytes): a Payload shorter than it was cut by the
//     runtime (dead_letter_max_bytes) and DeadLetter.Cut reports it.
//   - A store that implements GroupApplier (all three do) applies several
//     units' batches in fewer round trips (group commit), each batch with
//     the outcome Apply would give it alone: one batch's lost lease or
//     refused record never rolls back another's writes.
//
// # Goroutines and blocking
//
// Every method may block on I/O and honours ctx. The SQL stores also bound
// every call by a timeout of their own (store.timeout, default 10 s), so no
// call waits forever on a lock or connection whatever ctx says. Stores are
// safe for concurrent use and start no goroutines that outlive Close.
package persistence
