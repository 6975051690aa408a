// Package memory is an in-memory persistence.Store for the testkit, the demo
// and unit tests. It has the semantics of the SQL stores (it passes the same
// storetest suite) plus deterministic fault injection.
//
// # Guarantees
//
//   - The guarantees of package persistence: fenced, atomic Apply; tokens
//     that increase with every successful Acquire and are kept across
//     Release; last-op-wins per key; unchanged documents not rewritten;
//     checkpoints that only move forward; dedupe by message id.
//   - Time comes only from the injected clock.Clock (nil: clock.Real{}): it
//     judges lease expiry (a lease with ExpiresAt <= now is expired) and
//     stamps every write. Times are returned in UTC.
//   - Deterministic: no goroutines, no randomness. The same calls with the
//     same clock readings give the same results.
//   - Documents are stored as given (callers pass canonical JSON); they are
//     compared the way PostgreSQL compares jsonb (key order, whitespace and
//     the spelling of numbers do not matter). Everything returned is a copy
//     the caller owns; everything given is copied.
//
// # Semantics the package doc leaves open
//
//   - Acquire refuses an empty unit or owner, a TTL <= 0 and a negative
//     Stale. A holder absent from AcquireRequest.Live (an empty Live counts
//     every holder absent) is taken over once now - RenewedAt >= Stale; a
//     released, expired or own lease at once. Acquire and Renew set the
//     lease's RenewedAt to now; RenewLeases sets its owner's heartbeat,
//     and every lease reports the later of the two.
//   - RenewLeases refuses an empty owner and a TTL <= 0; with no leases it
//     records the heartbeat only. The owner argument, not the leases'
//     Owner fields, names the holder. It checks every lease of ls, so
//     lost is exact; renewed and lost follow the order given; nothing
//     is ever skipped (there are no row locks).
//   - Renew and Release need the lease's owner and token; a lease past its
//     expiry that nobody took over can still be renewed. Release empties the
//     owner, keeps the token and sets ExpiresAt to now.
//   - Apply is fenced by the token alone: a lease row that is missing or has
//     another token fails the batch with ErrLeaseLost.
//   - With Dedupe, a message id repeated within one batch is a duplicate the
//     second time. Ops without a MessageID are never deduplicated.
//   - A repeated dead letter (same source, unit, position) keeps its id and
//     FirstFailedAt, increments Attempts, sets LastFailedAt, takes the new
//     reason, key, payload and payload size, and is pending again.
//   - An upsert or Put of a document that is not JSON fails with an error
//     matching persistence.ErrPermanent.
//   - Handle is called only when the batch has fresh OpMessage ops; a batch
//     with OpMessage ops and no Handle fails. Records written through the
//     Tx carry the batch's source, unit and last position.
//   - Finished is sticky, and Finished alone (no Checkpoint) marks the
//     stored position, creating an empty one when the unit has none.
//   - Batch.Reset writes Checkpoint whatever the stored one is (creating
//     the row), Finished as the batch says; a Reset with an empty
//     Checkpoint is refused before anything runs, Handle included.
//   - InitSource refuses an empty source; it stores the units sorted, once
//     each, and an empty first list is kept as the answer.
//
// # Fault injection
//
// FailNext, FailAfterCommit, SetDown and BreakFencing change what the next
// calls do; see each. Refuse makes a records table refuse documents with a
// given member, as a CHECK constraint would: upserts and handler Puts of
// such a document fail with an error matching persistence.ErrPermanent (an
// unchanged document is not written, so not refused, as in SQLite). They
// never start goroutines or sleep.
//
// # Goroutines and locking
//
// The Store starts no goroutines. One mutex guards all state; every call
// holds it from start to end, Apply included while it runs Batch.Handle, so
// a handler must use only its Tx and never call the Store (that deadlocks,
// as it would on a single-connection SQLite store).
package memory
