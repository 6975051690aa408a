package actors

import (
	"context"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/internal/mutate"
	"github.com/drover-dev/drover/persistence"
)

// ---- seek through the controls table (issue 13 item 2) ----
//
// A seek asked of a node that does not own the unit is written to the
// unit's control row (persistence.ControlChange.Seek: seek_id one up, the
// target). Every node reads the table at its renewal rounds (controls.go);
// the view keeps the unit rows with a seek pending (seek_id >
// seek_done_id), and while one is, every read tells the units again. The
// unit's owner, holding its lease, picks it up (pickUpSeek): requestSeek
// with the row's id and target, no one waiting for the answer. The seek's
// Reset checkpoint carries Batch.SeekDone, so the row is marked done in
// the same fenced transaction: carried out exactly once, by whoever holds
// the lease when it runs (a unit that moves first is picked up by its next
// owner; a stale owner's write is fenced off with its mark). A seek the
// broker refuses (a position it does not hold) is marked done by a fenced
// batch of only SeekDone, its error in last_seek and the audit table, so
// that it is not tried again at every round. A seek with an id first
// reads the table under the lease (seekJob.alreadyDone): a view read
// before another owner's commit may show a seek done since.

// pendingSeek is unit's control row when it has a seek this node has not
// carried out yet.
func (c *controlView) pendingSeek(unit string) (persistence.Control, bool) {
	if c == nil {
		return persistence.Control{}, false
	}
	p := c.v.Load()
	if p == nil || p.seeks == nil {
		return persistence.Control{}, false
	}
	row, ok := p.seeks[unit]
	if !ok {
		return row, false
	}
	c.doneMu.Lock()
	done := c.done[unit]
	c.doneMu.Unlock()
	return row, row.SeekID > done
}

// seekMarked records that this node carried out (or marked done) unit's
// control-row seek id.
func (c *controlView) seekMarked(unit string, id int64) {
	if c == nil || id == 0 {
		return
	}
	c.doneMu.Lock()
	defer c.doneMu.Unlock()
	if c.done == nil {
		c.done = map[string]int64{}
	}
	c.done[unit] = max(c.done[unit], id)
}

// rowSeek is the seek a control row asks for; a target that does not
// parse is refused by the job, and so marked done.
func rowSeek(row persistence.Control) *seekUnit {
	m := &seekUnit{Seek: Seek{Unit: row.Unit, To: row.Seek, ID: row.SeekID, By: row.By, Reason: row.Reason}}
	m.target, m.bad = brokers.ParseSeekTarget(row.Seek)
	return m
}

// pickUpSeek starts the unit's pending control-row seek when it can seek
// now; else the next read of the table tells it again.
func (u *unitActor) pickUpSeek(ctx actor.Context) {
	row, ok := u.node.controls.pendingSeek(u.id)
	if !ok || u.seek != nil || u.spec.isQueue() || u.phase.stopping() || !u.holdsLease ||
		u.phase == phaseStarting || u.phase == phaseAcquiring {
		return
	}
	u.node.env.trace("seek-picked", u.id, fmt.Sprintf("%d %s", row.SeekID, row.Seek))
	u.requestSeek(ctx, rowSeek(row))
}

// joinSeek answers a seek with an id that this unit is carrying out or
// carried out already (the row's pickup raced the owner's own request):
// it reports whether it did.
func (u *unitActor) joinSeek(m *seekUnit) bool {
	switch {
	case m.ID == 0:
		return false
	case u.seek != nil && u.seek.ID == m.ID && u.seek.reply == nil:
		u.seek.reply = m.reply
		return true
	case u.lastSeek != nil && u.lastSeek.res.ID == m.ID:
		m.answer(u.lastSeek.res, u.lastSeek.err)
		return true
	}
	return false
}

// seekOutcome is the last seek with an id the unit finished.
type seekOutcome struct {
	res SeekResult
	err error
}

// alreadyDone reads the unit's control row under the lease: its seek id
// j.id is done (by a previous owner, or this node before a restart).
func (j seekJob) alreadyDone(c context.Context) (bool, error) {
	rows, err := j.store.ListControls(c)
	if err != nil {
		return false, fmt.Errorf("read the control row: %w", err)
	}
	for _, r := range rows {
		if r.Source == j.spec.Name && r.Unit == j.unit {
			return r.SeekDoneID >= j.id, nil
		}
	}
	return false, nil
}

// markRefused marks a refused seek with an id done, by a fenced batch of
// only SeekDone; it returns r with marked set, or the store's error.
func (j seekJob) markRefused(c context.Context, r seekResult) seekResult {
	if j.id == 0 || mutate.On(mutate.SeekNeverDone) {
		return r
	}
	b := &persistence.Batch{Source: j.spec.Name, Unit: j.unit, Lease: j.lease, SeekDone: j.id}
	if _, err := j.store.Apply(c, b); err != nil {
		return seekResult{err: fmt.Errorf("%w; marking it done: %w", r.err, err)}
	}
	r.marked = true
	j.audit(c, fmt.Sprintf("id=%d refused: %v", j.id, r.err))
	return r
}

// audit records a control-row seek's outcome; a failure to write it is
// the job's to ignore (the checkpoint and the row say what happened).
func (j seekJob) audit(c context.Context, args string) {
	_, _ = j.store.WriteAudit(c, persistence.AuditEntry{Node: j.lease.Owner, By: j.by, Action: "seek", Source: j.spec.Name,
		Unit: j.unit, Args: args, Reason: j.reason})
}
