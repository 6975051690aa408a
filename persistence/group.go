package persistence

import "context"

// GroupApplier is an optional capability of an Applier: it writes several
// batches, of several units, in fewer round trips to the database than one
// Apply each (group commit). The runtime uses it when the node's
// group_commit setting is on and the store has it; otherwise it calls Apply.
//
// Every batch of the group has exactly the outcome Apply would give it, on
// its own: it is fenced by its own Lease.Token (ErrLeaseLost), refused on
// its own (ErrPermanent), deduplicated against everything committed before
// it — batches earlier in the group included —, and its checkpoint, Reset,
// Finished and Handle behave as in Apply. One batch's failure never rolls
// back another's writes: a lost lease or a refused record costs only its
// own batch.
//
// The batches are applied in slice order, so two batches of one unit in a
// group behave as two Applies one after the other. The runtime sends at
// most one batch per unit (a unit has one apply in flight); stores need
// not rely on it.
//
// A failure of the group as a whole (the connection lost, the commit
// failed) is reported in every batch it may have touched, as a transient
// error: the outcome of those batches is unknown, as that of an Apply
// whose commit was not answered.
//
// ApplyGroup returns one result per batch, in the batches' order; bs and
// its batches are not modified. It is safe to call concurrently.
type GroupApplier interface {
	ApplyGroup(ctx context.Context, bs []*Batch) []GroupResult
}

// ParallelGroups is an optional capability of a GroupApplier: how many
// groups it applies in parallel to good effect (PostgreSQL: its pool's
// connections; SQLite's one connection: 1). The runtime keeps that many
// groups in flight at most, so that under light load a batch goes at once
// and only batches that would otherwise wait share a call. Without it,
// one.
type ParallelGroups interface {
	ParallelGroups() int
}

// GroupResult is the outcome of one batch of ApplyGroup: what Apply would
// have returned for it.
type GroupResult struct {
	Applied Applied
	Err     error
}

// ApplyEach applies every batch with a.Apply, in order: the ApplyGroup of
// a store that has no shorter way, and the reference the group stores are
// compared to.
func ApplyEach(ctx context.Context, a Applier, bs []*Batch) []GroupResult {
	out := make([]GroupResult, len(bs))
	for i, b := range bs {
		out[i].Applied, out[i].Err = a.Apply(ctx, b)
	}
	return out
}
