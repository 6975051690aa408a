// Package storetest is the conformance suite every persistence.Store runs,
// one body of tests for all of them (as nats-server's store tests run every
// store through the same definitions).
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, storetest.Harness{Open: ..., Clock: true})
//	}
//
// # Capabilities
//
// A Harness opens a fresh, empty store per test and says what else the
// store can do. Definitions that need a capability run only where it is
// offered; elsewhere they do not apply (they are not skipped):
//
//   - Clock: the store takes an injected clock. The suite gives it a manual
//     Clock and checks exact timestamps and expiry boundaries. Without it
//     (PostgreSQL judges expiry by now()), expiry tests use a 1 s TTL and
//     wait for the condition on the wall clock with a deadline, and
//     timestamps are checked to within a minute.
//   - Schema: migrations are idempotent across reopenings, and a database
//     stamped with a newer schema version refuses to open with
//     persistence.ErrSchemaTooNew naming both versions.
//   - FailMidTx: a fault injected inside Apply's transaction, after part of
//     the batch was written, leaves nothing behind.
//   - Refuse: the store refuses documents with a member "bad" (a CHECK
//     constraint): such a batch, or a handler's Put of such a document,
//     fails with an error matching persistence.ErrPermanent and writes
//     nothing; the batch without it commits.
//
// Every store must also let two slots apply overlapping message ids in
// opposite orders concurrently without failing (no lock-order deadlock),
// and leave nothing behind when a batch fails half-way
// for reasons the suite can cause through the interface: a handler that
// writes and then errors, and an invalid JSON document after valid ops.
//
// A store that implements persistence.GroupApplier also runs the group
// cases: in a group of three, a lost lease or a refused record costs only
// its own batch (nothing of it written, its dedupe ids neither); two slots
// carrying one message id apply it once; two batches of one unit apply in
// order; a handler batch writes through its Tx inside the group and a
// failing handler rolls back its own batch only.
//
// # Semantics pinned here that package persistence leaves open
//
//   - Acquire refuses an empty unit or owner, a TTL <= 0 and a negative
//     Stale.
//   - A lease is expired when ExpiresAt <= the store's now; a holder absent
//     from Live is stale when now - RenewedAt >= Stale (so Stale 0 takes
//     over at once), RenewedAt being the later of the lease's renewal and
//     its owner's heartbeat. Acquire sets RenewedAt = AcquiredAt; Renew
//     and RenewLeases set it to now and keep AcquiredAt.
//   - RenewLeases refuses an empty owner and a TTL <= 0; no leases is no
//     error. The owner argument names the holder. It extends exactly the
//     leases whose ExpiresAt is before now + ttl/2 (persistence.RenewDue),
//     and finds every lost lease whether or not earlier rounds found
//     nothing changed. renewed and lost follow the order of the leases
//     given, which are not modified.
//   - Batch.Reset writes Finished as the batch says (a stored Finished is
//     cleared); a Reset with an empty Checkpoint writes nothing. Start
//     markers order after the empty position, as text among themselves,
//     and before every decimal position.
//   - InitSource refuses an empty source; an empty first list is an answer
//     (a non-nil empty slice) that later callers get too.
//   - Apply is fenced by the token alone; a missing lease row is
//     ErrLeaseLost. Applies of one unit are serialised (no lost update
//     between two concurrent read-modify-write handlers), and a takeover
//     that completes while a batch is inside its transaction fences it off.
//   - With Dedupe, a message id repeated within a batch is a duplicate; ops
//     without MessageID never are; ids are per source; without Dedupe ids
//     are neither checked nor recorded.
//   - A repeated dead letter keeps its id and FirstFailedAt, increments
//     Attempts, moves LastFailedAt, takes the new reason (and payload with
//     its size) and is pending again.
//   - A dead letter's PayloadBytes is the op's PayloadBytes when it is
//     larger than its Payload (a cut payload), len(Payload) otherwise.
//   - An upsert of a document that is not JSON fails with an error
//     matching persistence.ErrPermanent.
//   - Handle runs only when a batch has fresh OpMessage ops; message ops
//     without a Handle fail the batch. Handler writes carry the batch's
//     source and unit.
//   - Finished is sticky; Finished with no Checkpoint marks the stored (or
//     an empty) position.
//   - Records with a limit <= 0 returns every row; a table never written is
//     empty; an invalid table name is an error.
//
// # Goroutines
//
// Run's tests start goroutines only to race store calls against each other
// and wait for all of them before returning. Without a manual Clock, tests
// of expiry and staleness let the store's own time pass on the wall clock
// (1 s leases and Stale), with deadlines. Clock starts none; its
// AfterFunc callbacks run on the goroutine that calls Advance or Set.
package storetest
