// Package mutate switches deliberate bugs on, for tests that show the
// simulator catches them.
//
// Each fix of issues 9 and 10 (and of some review findings) left a named
// switch at the place it fixed: when the switch is on, the code behaves as
// it did before the fix. Production
// builds cannot turn a switch on: without the build tag drover_mutate, On
// is a constant false and the compiler drops the guarded code. The tests
// built with -tags drover_mutate (testkit/mutation_test.go) turn one switch
// on at a time and check that `drover sim` finds a broken invariant among
// its first seeds.
package mutate

// The switches, by the issue item whose fix they undo.
const (
	// ResolveEveryOpen: a stream unit with no checkpoint resolves its start
	// on every open and does not record it (item 1).
	ResolveEveryOpen = "resolve-every-open"
	// LatestForNewUnits: units that appear after the first discovery start
	// as `start` says instead of at their earliest (item 1).
	LatestForNewUnits = "latest-for-new-units"
	// WaitForUnlistedParents: a child waits for parents the stream no
	// longer lists (item 2).
	WaitForUnlistedParents = "wait-for-unlisted-parents"
	// KeepInvalidCheckpoint: a checkpoint the broker no longer knows is
	// kept while the reader reopens at the earliest (item 3).
	KeepInvalidCheckpoint = "keep-invalid-checkpoint"
	// ReusedQueueIDs: the memory queue reuses message ids after a recreate,
	// as NATS ids did (item 4).
	ReusedQueueIDs = "reused-queue-ids"
	// ReadUncommitted: the memory stream returns records of open and
	// aborted transactions (item 5).
	ReadUncommitted = "read-uncommitted"
	// TakeoverAtOnce: a lease whose holder is absent from the view is taken
	// over at once, renewing or not (item 6).
	TakeoverAtOnce = "takeover-at-once"
	// FailuresSpanSuccess: the failure count survives successful fetches
	// (item 8).
	FailuresSpanSuccess = "failures-span-success"
	// NoExtend: queue batches in flight are not extended (item 9).
	NoExtend = "no-extend"
	// NackConcurrent: a nack runs beside the next receive (item 10).
	NackConcurrent = "nack-concurrent"
	// SupervisorLeak: a restarted supervisor keeps its timers running
	// (item 11).
	SupervisorLeak = "supervisor-leak"
	// PlaceIgnoringSources: placement ignores which sources members run
	// (item 12).
	PlaceIgnoringSources = "place-ignoring-sources"
	// RefetchFailedBatch: a failed stream batch is fetched again from the
	// checkpoint instead of retried as the same batch (item 13).
	RefetchFailedBatch = "refetch-failed-batch"
	// NoStoreDeadline: no session timeouts, so the transaction of a node
	// that vanished mid-apply keeps its row locks for hours (item 7; the
	// testkit's lock model).
	NoStoreDeadline = "no-store-deadline"

	// The switches of issue 10.

	// NoBatchBytes: a fetch is applied as one batch whatever its bytes
	// (item 6).
	NoBatchBytes = "no-batch-bytes"
	// WholeDeadLetters: a dead letter keeps the whole body, however large
	// (item 6).
	WholeDeadLetters = "whole-dead-letters"
	// RetryPermanent: a batch the store refuses for what it holds is
	// retried as the same whole batch, like any failure (item 7).
	RetryPermanent = "retry-permanent"
	// RefuseAtOnce: a record the store refuses alone is dead-lettered at
	// the first refusal, not tried alone a second time (item 7: a race
	// that reports a permanent class, such as concurrent CREATE TABLE IF
	// NOT EXISTS on PostgreSQL, dead-letters a good record).
	RefuseAtOnce = "refuse-at-once"

	// GhostUnits: a unit's status update creates its entry in the tree
	// when it is missing and reaches whichever entry has its id, so the
	// last writes of the units of a restarted supervisor bring back the
	// entries it forgot: stopped units no one runs (found by review).
	GhostUnits = "ghost-units"

	// StaleStateMetrics: the metrics learn a unit's state when its entry
	// is made, not when the state changes, so drover_unit_state shows
	// starting for a unit that runs (issue 12 item 5).
	StaleStateMetrics = "stale-state-metrics"

	// CaughtUpUnknown: a fetch that leaves nothing in the broker (lag 0)
	// but dates nothing is taken for an unknown age, so a caught-up unit
	// shows lag_seconds -1 instead of 0 (issue 13 item 6).
	CaughtUpUnknown = "caught-up-unknown"

	// StaleRenewBatch: the leaser's next round sends the batch of the
	// last one again after a unit registered a lease (a new unit, or a
	// new token), so that lease is never renewed (issue 12 item 5).
	StaleRenewBatch = "stale-renew-batch"

	// PauseOnlyLocal: the renewal rounds do not read the controls table,
	// so a node learns of a pause only at its start and when it writes
	// the control itself; a unit that moves to a node that was running
	// already goes on fetching (issue 13 item 1).
	PauseOnlyLocal = "pause-only-local"

	// SeekKeepsAhead: a seek keeps the batch fetched ahead of the old
	// position and applies it after the new checkpoint, so the checkpoint
	// jumps forward again and part of what the seek asked for is never
	// applied again (issue 13 item 2).
	SeekKeepsAhead = "seek-keeps-ahead"

	// SeekNeverDone: a seek picked up from the controls table is never
	// marked done (no Batch.SeekDone), so its owner carries it out again
	// at every read of the table (issue 13 item 2).
	SeekNeverDone = "seek-never-done"

	// ExpiredSeekApplied: the owner of a unit carries out a seek of the
	// controls table however long it waited (no expiry check under the
	// lease), so a seek asked of a unit nobody held is applied when one
	// appears, long after (issue 13 item 2, review).
	ExpiredSeekApplied = "expired-seek-applied"

	// SeekAgeByNodeClock: a node's renewal round judges a pending seek's
	// age by its own clock against the row's seek_requested_at and asks
	// the store to expire it whatever the store's clock says, so one node
	// whose clock runs ahead expires every pending seek (review).
	SeekAgeByNodeClock = "seek-age-by-node-clock"

	// AnonymousTakeover: a unit that took its lease over from another
	// holder logs a plain acquisition that names no previous holder, as
	// before Acquire reported it (issue 13 item 7).
	AnonymousTakeover = "anonymous-takeover"

	// NoStreamID: a checkpoint records no stream incarnation, so a stream
	// deleted and created again, then refilled past the checkpoint, is
	// read on from there: the messages up to it are skipped (review).
	NoStreamID = "no-stream-id"

	// RegistryDeadLetters: a fetch whose schemas the registry could not
	// be asked for is decoded anyway, so its messages are dead-lettered
	// as unresolved instead of the unit retrying (issue 14 item 2).
	RegistryDeadLetters = "registry-dead-letters"
)

// All lists every switch.
var All = []string{
	ResolveEveryOpen, LatestForNewUnits, WaitForUnlistedParents, KeepInvalidCheckpoint, ReusedQueueIDs,
	ReadUncommitted, TakeoverAtOnce, FailuresSpanSuccess, NoExtend, NackConcurrent, SupervisorLeak,
	PlaceIgnoringSources, RefetchFailedBatch, NoStoreDeadline,
	NoBatchBytes, WholeDeadLetters, RetryPermanent, RefuseAtOnce,
	GhostUnits, StaleStateMetrics, StaleRenewBatch,
	CaughtUpUnknown, PauseOnlyLocal, SeekKeepsAhead, AnonymousTakeover, NoStreamID,
	SeekNeverDone, ExpiredSeekApplied, SeekAgeByNodeClock, RegistryDeadLetters,
}
