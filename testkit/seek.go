package testkit

// Seeks (drover seek) in the simulation, and what they do to the
// invariants.
//
// A seek back moves a unit's checkpoint below what it applied: the
// messages after the new checkpoint, up to the last one applied, are
// applied again, on purpose. The ledger counts them: when the seek's
// fenced reset commits (onReset), each message of the unit's current
// generation positioned in (new checkpoint, last applied] that was
// applied gets one more application allowed. The "duplicated" check then
// fires only past what the seeks allowed, and the "reapplied" check of
// Report requires every allowed application to have happened: a seek
// back of 100 positions re-applies exactly those 100, not fewer (a
// checkpoint that jumps forward again) and not more (one at or below the
// new checkpoint applied again is a duplicate). A seek forward
// ("after:<p>") skips the messages up to p on purpose: they are excused
// from "lost" when not applied, and a re-application an earlier seek back
// asked for and that has not happened is no longer asked for (a reset of
// on_position_reset: latest, simkplseek.go, counts as such a seek).

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/persistence"
)

// seekMark is a seek asked and not answered yet; its reset, when it
// commits, is a cause the ledger accepts (onReset).
type seekMark struct {
	unit string
	done bool // its reset committed
}

// Seek asks the node holding unit's lease to seek it (actors.Node.Seek);
// reply is called once, during the run, with the node's answer. It fails
// at once when no running node holds the lease.
func (c *Cluster) Seek(s actors.Seek, reply func(actors.SeekResult, error)) error {
	owner := ""
	ls, err := c.inner.List(context.Background())
	if err != nil {
		return fmt.Errorf("testkit: list leases: %w", err)
	}
	for _, l := range ls {
		if l.Unit == s.Unit {
			owner = l.Owner
		}
	}
	n, ok := c.nodes[owner]
	if !ok || n.node == nil || !slices.Contains(c.Running(), owner) {
		return fmt.Errorf("testkit: no running node holds the lease of %s (holder %q)", s.Unit, owner)
	}
	m := &seekMark{unit: s.Unit}
	c.led.seeks = append(c.led.seeks, m)
	c.event("seek", owner, s.Unit, s.To)
	n.node.Seek(s, func(r actors.SeekResult, err error) {
		c.led.dropSeek(m)
		detail := r.From + " -> " + r.Position
		if err != nil {
			detail = err.Error()
		}
		c.event("sought", owner, s.Unit, detail)
		if reply != nil {
			reply(r, err)
		}
	})
	return nil
}

// SeekVia asks for s as `drover seek` sent to node via would when via
// does not own the unit: the seek is written to the unit's control row
// (seek_id one up; an audit entry), via applies the table at once, and
// the unit's owner picks it up at a renewal round and carries it out
// under its lease, marking the row done with its checkpoint. Nobody waits
// for an answer: the ledger accepts one reset of the unit for it. It
// returns the row as written.
func (c *Cluster) SeekVia(via string, s actors.Seek) (persistence.Control, error) {
	ctx := context.Background()
	row, err := c.inner.SetControl(ctx, persistence.ControlChange{Source: sourceOf(s.Unit), Unit: s.Unit, Seek: s.To,
		Node: via, Action: "seek", Args: "to=" + s.To, By: s.By, Reason: s.Reason})
	if err != nil {
		return row, err
	}
	c.led.seeks = append(c.led.seeks, &seekMark{unit: s.Unit})
	c.led.seekAsked[fmt.Sprintf("%s#%d", s.Unit, row.SeekID)] = row.SeekRequestedAt
	c.event("seek", via, s.Unit, fmt.Sprintf("%s via the control row (id %d)", s.To, row.SeekID))
	if n, err := c.node(via); err == nil && n.node != nil && n.state == "running" {
		if rows, err := c.inner.ListControls(ctx); err == nil {
			n.node.SetControls(rows)
		}
	}
	return row, nil
}

// ApplyControls has node apply rows as its view of the controls table at
// once, as a renewal round's read would (a stale view, in tests).
func (c *Cluster) ApplyControls(node string, rows []persistence.Control) error {
	n, err := c.node(node)
	if err != nil {
		return err
	}
	if n.node == nil || n.state != "running" {
		return fmt.Errorf("testkit: node %s does not run", node)
	}
	n.node.SetControls(rows)
	return nil
}

// SeekExpirySlack is how long past the seek expiry a seek's reset may
// still commit: the owner checks the expiry when the seek begins, and
// the seek's store calls take virtual time after that.
const SeekExpirySlack = 10 * time.Second

// checkSeekExpiry is the seek-expiry invariant, for a seek's reset just
// committed: a seek asked through a control row is carried out within the
// seek expiry (Tuning.SeekExpiry) or never; one that waited longer (its
// unit unowned, or not there yet) must have been marked done, expired.
func (c *Cluster) checkSeekExpiry(b *persistence.Batch) {
	at, ok := c.led.seekAsked[fmt.Sprintf("%s#%d", b.Unit, b.SeekDone)]
	if !ok || at.IsZero() {
		return
	}
	expiry := c.cfg.Tuning.SeekExpiry
	if expiry <= 0 {
		expiry = actors.DefaultSeekExpiry
	}
	if age := c.s.now.Sub(at); age > expiry+SeekExpirySlack {
		c.check("seek-expiry", fmt.Sprintf("%s: seek %d asked at %s carried out %s later (to %s, token %d by %s); the seek expiry is %s",
			b.Unit, b.SeekDone, at.Format(time.TimeOnly), age, b.Checkpoint, b.Lease.Token, b.Lease.Owner, expiry))
	}
}

// checkExpiredSeek is the other half of the seek-expiry invariant, for a
// seek just marked expired by a renewal round (ExpireSeek): it had waited
// at least the seek expiry by the store's (virtual) clock, whatever the
// clock of the node that marked it says.
func (c *Cluster) checkExpiredSeek(e persistence.SeekExpiry) {
	at, ok := c.led.seekAsked[fmt.Sprintf("%s#%d", e.Unit, e.ID)]
	if !ok || at.IsZero() {
		return
	}
	expiry := c.cfg.Tuning.SeekExpiry
	if expiry <= 0 {
		expiry = actors.DefaultSeekExpiry
	}
	if age := c.s.now.Sub(at); age < expiry {
		c.check("seek-expiry", fmt.Sprintf("%s: seek %d asked at %s marked expired by %s only %s later; the seek expiry is %s",
			e.Unit, e.ID, at.Format(time.TimeOnly), e.Node, age, expiry))
	}
}

// dropSeek forgets an answered seek.
func (l *ledger) dropSeek(m *seekMark) {
	if i := slices.Index(l.seeks, m); i >= 0 {
		l.seeks = slices.Delete(l.seeks, i, i+1)
	}
}

// takeSeek reports whether a seek of unit waits for its reset, and marks
// the oldest one done.
func (l *ledger) takeSeek(unit string) bool {
	for _, m := range l.seeks {
		if m.unit == unit && !m.done {
			m.done = true
			return true
		}
	}
	return false
}

// sought records a seek's reset of b.Unit to b.Checkpoint: the messages
// it makes the unit apply again (back), or skip (forward).
func (l *ledger) sought(b *persistence.Batch) {
	to := brokers.Applied(b.Checkpoint)
	last := l.lastPos[b.Unit]
	gen := l.unitGen[b.Unit]
	for key, p := range l.produced {
		if p.unit != b.Unit || p.gen != gen {
			continue
		}
		switch {
		case brokers.ComparePositions(p.position, to) > 0 && brokers.ComparePositions(p.position, last) <= 0 && l.applied[key] > 0:
			l.reapply[key]++
		case brokers.ComparePositions(p.position, to) <= 0 && brokers.ComparePositions(p.position, last) > 0 && l.applied[key] == 0:
			l.skipped[key] = true // sought past it: not lost, not awaited
			l.unapplied--
		case brokers.ComparePositions(p.position, to) <= 0 && brokers.ComparePositions(p.position, last) > 0 && l.applied[key] < 1+l.reapply[key]:
			l.reapply[key]-- // a seek back asked for it again; this reset skips it
		}
	}
}

// reapplyViolations lists the messages a seek asked to apply again that
// were not (at most five, and a count), in the unit's current incarnation.
func (l *ledger) reapplyViolations() []Violation {
	var short []string
	for key, n := range l.reapply {
		if p := l.produced[key]; p.gen != l.unitGen[p.unit] {
			continue // the stream was recreated since: its unit reads another incarnation
		}
		if l.applied[key] < 1+n {
			short = append(short, key)
		}
	}
	slices.Sort(short)
	var out []Violation
	for i, k := range short {
		if i == 5 {
			out = append(out, Violation{"reapplied", fmt.Sprintf("... and %d more", len(short)-5)})
			break
		}
		out = append(out, Violation{"reapplied", fmt.Sprintf("%s applied %d times; the seeks back over it asked for %d", k, l.applied[k], 1+l.reapply[k])})
	}
	return out
}
