package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

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
// seek_done_id). A read tells a unit of a pending seek once per seek id
// (controlView.tell): the node remembers the ids it told of, and forgets
// one when its row is no longer pending, so that 10,000 units get no
// message per round while some seek waits. A unit that cannot seek when
// told looks again itself when it can: once it holds its lease and has
// opened its reader, and when a seek it was carrying out ends; a seek
// that failed for a reason that may pass (the store) asks to be told
// again at the next read (retell). The
// unit's owner, holding its lease, picks it up (pickUpSeek): requestSeek
// with the row's id and target, no one waiting for the answer. The seek's
// Reset checkpoint carries Batch.SeekDone, so the row is marked done in
// the same fenced transaction: carried out exactly once, by whoever holds
// the lease when it runs (a unit that moves first is picked up by its next
// owner; a stale owner's write is fenced off with its mark). A seek the
// broker refuses (a position it does not hold) is marked done by a fenced
// batch of only SeekDone, its error in last_seek and the audit table, so
// that it is not tried again at every round. A seek with an id first
// reads its row under the lease (seekJob.checkRow): a view read before
// another owner's commit may show a seek done since.
//
// Seeks expire (Tuning.SeekExpiry, node.seek_expiry): checkRow refuses a
// seek that had waited longer than the expiry when it read the row under
// the lease (Control.SeekAge: the store's clock, never the node's; a node
// clock ahead of the store's expires nothing) and marks it done,
// expired, under the lease; a seek no owner carries out (its unit does
// not exist, its source is gone) is marked done, expired, by any node's
// renewal round SeekExpiryGrace after that (expireSeeks,
// Controls.ExpireSeek). A seek's fenced mark fails on a row that marks it
// done already (persistence.ErrSeekDone), so an expired seek never
// commits, however the marks race.

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

// tell returns the units of seeks (a view's pending rows) to tell now:
// those whose seek id is newer than the last this node told of and than
// the last it carried out, sorted; it remembers them and forgets the
// units with no seek pending any more.
func (c *controlView) tell(seeks map[string]persistence.Control) []string {
	c.doneMu.Lock()
	defer c.doneMu.Unlock()
	var out []string
	for u, row := range seeks {
		if row.SeekID > c.told[u] && row.SeekID > c.done[u] {
			out = append(out, u)
		}
	}
	for u := range c.told {
		if _, ok := seeks[u]; !ok {
			delete(c.told, u)
		}
	}
	if len(out) > 0 && c.told == nil {
		c.told = map[string]int64{}
	}
	for _, u := range out {
		c.told[u] = seeks[u].SeekID
	}
	slices.Sort(out)
	return out
}

// retell has the next read of the table tell unit of its pending seek
// again (its try failed, and may succeed later).
func (c *controlView) retell(unit string) {
	if c == nil {
		return
	}
	c.doneMu.Lock()
	defer c.doneMu.Unlock()
	delete(c.told, unit)
}

// expireSeeks marks done, expired, the pending seeks of rows older than
// expiry plus SeekExpiryGrace (a seek no owner carried out: its unit does
// not exist, or its source is gone, or nobody held it), and marks them
// done in rows, so that this read's view does not show them (one done
// since, or overtaken by a newer seek, too: the next read shows the newer
// one). The age is the store's (Control.SeekAge, and ExpireSeek judges it
// again by the store's clock), never this node's clock against a store
// timestamp: a node whose clock runs ahead must not expire fresh seeks.
// The owner of a unit refuses an expired seek itself, under its lease
// (seekJob.checkRow); the grace leaves it that mark. A failure leaves the
// row for the next read.
// (now, the node's clock, serves only the mutation that brings the bug
// back.)
func expireSeeks(c context.Context, store persistence.Store, rows []persistence.Control, now time.Time, expiry time.Duration, node string) {
	for i, r := range rows {
		older := expiry + SeekExpiryGrace
		if mutate.On(mutate.SeekAgeByNodeClock) && !r.SeekRequestedAt.IsZero() {
			// the bug: the node's clock against the store's timestamp
			r.SeekAge, older = now.Sub(r.SeekRequestedAt), -time.Hour
		}
		if !r.PendingSeek() || r.SeekAge <= expiry+SeekExpiryGrace {
			continue
		}
		marked, err := store.ExpireSeek(c, persistence.SeekExpiry{Source: r.Source, Unit: r.Unit, ID: r.SeekID,
			OlderThan: older, Node: node,
			Why: expiredWhy(r, expiry) + "; no owner carried it out", By: r.By, Reason: r.Reason})
		if err == nil && marked {
			rows[i].SeekDoneID = r.SeekID
		}
	}
}

// seekExpired reports whether row's seek had waited longer than expiry
// when the row was read, by the store's clock.
func seekExpired(row persistence.Control, expiry time.Duration) bool {
	return row.SeekAge > expiry
}

// expiredWhy says why row's seek expired.
func expiredWhy(row persistence.Control, expiry time.Duration) string {
	return fmt.Sprintf("seek %d (to %s) asked at %s was not carried out within the seek expiry %s (%s ago by the store's clock)",
		row.SeekID, row.Seek, row.SeekRequestedAt.UTC().Format(time.RFC3339), expiry, row.SeekAge.Round(time.Millisecond))
}

// pickUpSeek starts the unit's pending control-row seek when it can seek
// now; else it looks again when it can (see the section comment).
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

// checkRow reads the unit's control row under the lease before a seek
// with an id runs: done (by a previous owner, or this node before a
// restart) or overtaken by a newer seek of the row (only the newest is
// carried out) reports already; a seek older than the expiry is marked
// done, expired, by a fenced batch of only SeekDone, and never carried
// out. ok: the seek may run.
func (j seekJob) checkRow(c context.Context) (r seekResult, ok bool) {
	rows, err := j.store.ListControls(c)
	if err != nil {
		return seekResult{err: fmt.Errorf("read the control row: %w", err)}, false
	}
	for _, row := range rows {
		if row.Source != j.spec.Name || row.Unit != j.unit {
			continue
		}
		switch {
		case row.SeekDoneID >= j.id || row.SeekID != j.id:
			return seekResult{already: true}, false
		case seekExpired(row, j.expiry) && !mutate.On(mutate.ExpiredSeekApplied):
			return j.markDone(c, seekResult{err: fmt.Errorf("%w: %s", ErrSeekExpired, expiredWhy(row, j.expiry))}, "expired"), false
		}
		return seekResult{}, true
	}
	return seekResult{}, true
}

// markDone marks a seek with an id that will not be carried out (refused,
// expired) done, by a fenced batch of only SeekDone, with an audit entry
// saying what (refused, expired) and why; it returns r with marked set,
// already when the row marks it done already, or the store's error.
func (j seekJob) markDone(c context.Context, r seekResult, what string) seekResult {
	if j.id == 0 || mutate.On(mutate.SeekNeverDone) {
		return r
	}
	b := &persistence.Batch{Source: j.spec.Name, Unit: j.unit, Lease: j.lease, SeekDone: j.id}
	if _, err := j.store.Apply(c, b); errors.Is(err, persistence.ErrSeekDone) {
		return seekResult{already: true}
	} else if err != nil {
		return seekResult{err: fmt.Errorf("%w; marking it done: %w", r.err, err)}
	}
	r.marked = true
	j.audit(c, fmt.Sprintf("id=%d %s: %v", j.id, what, r.err))
	return r
}

// audit records a control-row seek's outcome; a failure to write it is
// the job's to ignore (the checkpoint and the row say what happened).
func (j seekJob) audit(c context.Context, args string) {
	_, _ = j.store.WriteAudit(c, persistence.AuditEntry{Node: j.lease.Owner, By: j.by, Action: "seek", Source: j.spec.Name,
		Unit: j.unit, Args: args, Reason: j.reason})
}
