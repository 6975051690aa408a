package testkit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/drover-dev/drover/persistence"
)

// ---- controls: pause and resume (issue 13 item 1) ----

// PauseBound is how long a pause may take to stop a unit's applies in a
// quiet cluster: its owner learns of it at its next renewal round at the
// latest, and applies what it had fetched before it pauses. The pause
// invariant flags a batch of a paused unit committed later than that
// while no fault was in force since the pause (a store fault may hold a
// batch fetched before the pause in its retries for longer).
const PauseBound = 5 * time.Second

// pauseSpan is one pause of a source (unit "") or a unit: from its write
// until its resume (to zero while it lasts).
type pauseSpan struct {
	source, unit string
	from, to     time.Time
}

// Control pauses (paused) or resumes a whole source (unit "") or one unit
// (its full id, "orders/3") as `drover pause` sent to node via would: the
// control row and its audit entry are written to the store, via applies
// the table at once, the other nodes at their next renewal round. A via
// that does not run only writes.
func (c *Cluster) Control(via, source, unit string, paused bool) error {
	action := "pause"
	if !paused {
		action = "resume"
	}
	ctx := context.Background()
	if _, err := c.inner.SetControl(ctx, persistence.ControlChange{Source: source, Unit: unit, Paused: &paused,
		Node: via, Action: action, By: "testkit"}); err != nil {
		return err
	}
	c.event("control", via, unit, action+" "+source)
	if paused {
		c.pauses = append(c.pauses, pauseSpan{source: source, unit: unit, from: c.s.now})
	} else {
		for i := range c.pauses {
			if p := &c.pauses[i]; p.source == source && p.unit == unit && p.to.IsZero() {
				p.to = c.s.now
			}
		}
	}
	n, err := c.node(via)
	if err != nil || n.node == nil || n.state != "running" {
		return err
	}
	rows, err := c.inner.ListControls(ctx)
	if err != nil {
		return err
	}
	n.node.SetControls(rows)
	return nil
}

// checkPaused is the pause invariant, for a batch just committed.
func (c *Cluster) checkPaused(b *persistence.Batch) {
	if len(c.pauses) == 0 || len(b.Ops) == 0 {
		return
	}
	now := c.s.now
	for _, p := range c.pauses {
		if p.source != b.Source || (p.unit != "" && p.unit != b.Unit) || (!p.to.IsZero() && !now.Before(p.to)) {
			continue
		}
		if now.Sub(p.from) > PauseBound && c.quietDuring(p.from, now) {
			c.check("pause", fmt.Sprintf("%s applied %d messages with token %d (%s) at %s, paused since %s",
				b.Unit, len(b.Ops), b.Lease.Token, b.Lease.Owner, now.Format(time.TimeOnly), p.from.Format(time.TimeOnly)))
			return
		}
	}
}

// drawPause adds to a random run, from a random source of its own (the
// other draws stay what they were), on a third of the seeds: a pause of
// the source orders or of one of its units, sent to a random node, and
// its resume 2 to 12 s later sent to another random node.
func drawPause(c *Cluster, seed uint64, step func(time.Duration, string, ...any)) {
	rng := rand.New(rand.NewPCG(seed^0x13a, seed+0x13b))
	if rng.IntN(3) != 0 {
		return
	}
	names := c.Nodes()
	at := 3*time.Second + time.Duration(rng.Int64N(int64(15*time.Second)))
	d := 2*time.Second + time.Duration(rng.Int64N(int64(10*time.Second)))
	via, back := names[rng.IntN(len(names))], names[rng.IntN(len(names))]
	whole, pick := rng.IntN(2) == 0, rng.IntN(1<<20)
	what := "a unit of orders"
	if whole {
		what = "the source orders"
	}
	step(at, "pause %s via %s, resumed after %s via %s", what, via, d, back)
	unit := ""
	c.At(at, func() {
		if !whole {
			open := c.OpenPartitions("orders")
			unit = "orders/" + open[pick%len(open)]
		}
		_ = c.Control(via, "orders", unit, true)
	})
	c.At(at+d, func() { _ = c.Control(back, "orders", unit, false) })
}

// ListControls reaches the store through the testkit's faults: a store
// down fails it, and FailNext("controls", n); "any" does not (the runs
// drawn before the controls existed stay as they were).
func (a *auditStore) ListControls(ctx context.Context) ([]persistence.Control, error) {
	if err := a.controlsFault(); err != nil {
		return nil, err
	}
	return a.Store.ListControls(ctx)
}

// controlsFault is the fault a call of the controls table meets: the
// store down, or FailNext("controls", n).
func (a *auditStore) controlsFault() error {
	if a.down != nil {
		return a.down
	}
	if a.failNext["controls"] > 0 {
		a.failNext["controls"]--
		return fmt.Errorf("controls: %w", persistence.ErrInjected)
	}
	return nil
}

// ListControls fails while the node is cut off from the store.
func (n nodeStore) ListControls(ctx context.Context) ([]persistence.Control, error) {
	if err := n.cutErr(); err != nil {
		return nil, err
	}
	return n.auditStore.ListControls(ctx)
}

// ExpireSeek meets the store's faults as ListControls does.
func (a *auditStore) ExpireSeek(ctx context.Context, e persistence.SeekExpiry) (bool, error) {
	if err := a.controlsFault(); err != nil {
		return false, err
	}
	ok, err := a.Store.ExpireSeek(ctx, e)
	if ok && err == nil {
		a.c.checkExpiredSeek(e)
	}
	return ok, err
}

// ExpireSeek fails while the node is cut off from the store.
func (n nodeStore) ExpireSeek(ctx context.Context, e persistence.SeekExpiry) (bool, error) {
	if err := n.cutErr(); err != nil {
		return false, err
	}
	return n.auditStore.ExpireSeek(ctx, e)
}
