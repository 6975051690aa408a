package testkit

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/persistence"
)

// Seeks to sub-positions a record does not have (issue 14), on the kpl
// stream of a random run. An operator's seek to "<offset>/<index>" whose
// record is a plain one, or an aggregate of fewer user records, is taken:
// the memory reader (as the Kinesis one) opens there, and its first fetch
// fails with brokers.ErrPositionUnknown rather than skip the record or the
// aggregate's rest (brokers/memory/doc.go; README, "Seek"). So the seek's
// reset commits, then the unit resets its checkpoint again as the source's
// on_position_reset says: earliest (every user record applied again) or
// latest (what lies between skipped); under fail it waits, applying
// nothing, until the operator (moveCheckpoint) seeks it to after the whole
// record. The ledger expects exactly that (onReset): after such a seek's
// reset the unit applies nothing (checkSubRead) until its next reset,
// which is on_position_reset's, to the earliest position (nothing trimmed
// on kpl) or to one past the seek's, or under fail the operator's seek;
// the messages it reads again are allowed to be applied once more, those
// it skips are not awaited and, when a seek back had asked for them
// again, no longer asked for. At the end (checkSubSeeks) a seek whose
// reset committed and whose unit never reset after it is a violation.

// kplRecord is one record published to the kpl stream: its offset and how
// many user records it holds (0: a plain record).
type kplRecord struct {
	offset string
	subs   int
}

// note records what one publish wrote to partition p.
func (k *simKPL) note(p string, pos []string, subs int) {
	if len(pos) == 0 {
		return
	}
	off, _ := brokers.SplitPosition(pos[0])
	k.recs[p] = append(k.recs[p], kplRecord{offset: off, subs: subs})
}

// kplResetPolicy is the kpl source's on_position_reset, drawn from a
// source of its own: earliest (the default), latest or fail, a third of
// the seeds each.
func kplResetPolicy(seed uint64) actors.ResetPolicy {
	return []actors.ResetPolicy{actors.ResetEarliest, actors.ResetLatest, actors.ResetFail}[rand.New(rand.NewPCG(seed^0x5b4, seed+0x5b5)).IntN(3)]
}

// drawSubSeek draws, from a source of its own, on half of the seeds with
// a kpl stream one seek of a random kpl unit at 3 to 28 s to a
// sub-position of a random record published to it that the record does
// not have: past its aggregate's last user record (by 0 to 2), or any on a
// plain record, as "after:<offset>/<index>" or as "<offset>/<index+1>"
// (read first after <offset>/<index>), through its owner or, half of the
// time, a random node's control row.
func drawSubSeek(c *Cluster, seed uint64, k *simKPL, step func(time.Duration, string, ...any)) {
	rng := rand.New(rand.NewPCG(seed^0x5b6, seed+0x5b7))
	if k == nil || rng.IntN(2) == 0 {
		return
	}
	at := 3*time.Second + time.Duration(rng.Int64N(int64(25*time.Second)))
	pick, rec, extra, after := rng.IntN(1<<20), rng.IntN(1<<20), rng.IntN(3), rng.IntN(2) == 0
	row, node := rng.IntN(2) == 0, rng.IntN(1<<20)
	step(at, "seek a kpl unit to a sub-position its record does not have (after: %v, through the control row: %v); on_position_reset %s then", after, row, k.policy)
	c.At(at, func() {
		open := c.OpenPartitions("kpl")
		if len(open) == 0 {
			return
		}
		part := open[pick%len(open)]
		unit := "kpl/" + part
		recs := k.recs[part]
		if len(recs) == 0 || c.AwaitingReset("kpl") || c.led.subSeek[unit] != "" {
			return
		}
		if cp, err := c.inner.Checkpoint(context.Background(), unit); err != nil || cp.Position == "" {
			return // its start is not recorded yet: the seek's reset would be taken for it
		}
		r := recs[rec%len(recs)]
		cp := brokers.SubPosition(r.offset, r.subs+extra) // the sub-position the checkpoint becomes
		to := "after:" + cp
		if !after {
			to = brokers.SubPosition(r.offset, r.subs+extra+1)
		}
		c.led.subSeek[unit] = cp
		s := actors.Seek{Unit: unit, To: to, By: "sim", Reason: fmt.Sprintf("offset %s holds %d user records", r.offset, r.subs)}
		if names := c.Nodes(); row {
			_, _ = c.SeekVia(names[node%len(names)], s)
		} else {
			_ = c.Seek(s, func(_ actors.SeekResult, err error) {
				if err != nil && c.led.subSeek[unit] == cp {
					delete(c.led.subSeek, unit) // refused: nothing to expect
				}
			})
		}
		if k.policy == actors.ResetFail {
			c.At(3*time.Second, func() { c.moveCheckpoint(unit, "after:"+r.offset, 30) })
		}
	})
}

// moveCheckpoint is the operator who, under on_position_reset: fail,
// moves the checkpoint of a unit stuck on a sub-position its record does
// not have: once the seek's reset committed, a seek to after the whole
// record (to) through the unit's owner, asked again every 2 s (tries
// times at most) until a seek's reset has moved the checkpoint.
func (c *Cluster) moveCheckpoint(unit, to string, tries int) {
	l := c.led
	switch {
	case tries == 0 || l.subSeek[unit] == "" && l.subArmed[unit] == "":
		return // moved, or the first seek was refused (or expired): nothing to move
	case l.subArmed[unit] != "":
		_ = c.Seek(actors.Seek{Unit: unit, To: to, By: "sim", Reason: "on_position_reset is fail"}, nil)
	}
	c.At(2*time.Second, func() { c.moveCheckpoint(unit, to, tries-1) })
}

// subSeekReset is onReset's part for the kpl units sought to a
// sub-position their record does not have; it reports whether it took b.
// The seek's own reset (taken by the seek cases before) writes the
// sub-position and arms the unit: its next reset must be
// on_position_reset's from there.
func (c *Cluster) subSeekReset(b *persistence.Batch) bool {
	l := c.led
	from := l.subArmed[b.Unit]
	if from == "" {
		return false
	}
	delete(l.subArmed, b.Unit)
	to := brokers.Applied(b.Checkpoint)
	policy := c.resetPolicy(sourceOf(b.Unit))
	switch {
	case policy == actors.ResetFail:
		c.violate("position-reset", fmt.Sprintf("%s: sought to %s (not a user record of its offset), then reset to %s; on_position_reset is fail: only an operator moves it", b.Unit, from, b.Checkpoint))
	case policy == actors.ResetEarliest && to != "":
		c.violate("position-reset", fmt.Sprintf("%s: sought to %s (not a user record of its offset), then reset to %s; on_position_reset is earliest", b.Unit, from, b.Checkpoint))
	case policy == actors.ResetLatest && brokers.ComparePositions(to, from) <= 0:
		c.violate("position-reset", fmt.Sprintf("%s: sought to %s (not a user record of its offset), then reset to %s; on_position_reset is latest", b.Unit, from, b.Checkpoint))
	}
	l.sought(b)
	return true
}

// armSubSeek arms b.Unit when b is the reset of a seek to a sub-position
// its record does not have; any other seek's reset disarms it (the
// operator moved the checkpoint, as on_position_reset: fail asks).
func (l *ledger) armSubSeek(b *persistence.Batch) {
	delete(l.subArmed, b.Unit)
	if cp := l.subSeek[b.Unit]; cp != "" && cp == b.Checkpoint {
		delete(l.subSeek, b.Unit)
		l.subArmed[b.Unit] = cp
	}
}

// checkSubRead is the sub-position invariant for a batch b that commits
// messages: its unit is not armed (a reader opened on a sub-position its
// record does not have reads nothing).
func (c *Cluster) checkSubRead(b *persistence.Batch) {
	if from := c.led.subArmed[b.Unit]; from != "" && len(b.Ops) > 0 {
		c.violate("position-reset", fmt.Sprintf("%s: sought to %s, which its record does not have, then applied %d messages from %s on (token %d by %s) with no reset of on_position_reset (%s)",
			b.Unit, from, len(b.Ops), b.Ops[0].Position, b.Lease.Token, b.Lease.Owner, c.resetPolicy(sourceOf(b.Unit))))
		delete(c.led.subArmed, b.Unit) // said once
	}
}

// checkSubSeeks is the end of the sub-position invariant: every seek to a
// sub-position a record does not have that was carried out was followed
// by a reset of on_position_reset.
func (c *Cluster) checkSubSeeks() {
	for _, u := range slices.Sorted(maps.Keys(c.led.subArmed)) {
		c.check("position-reset", fmt.Sprintf("%s: sought to %s, which its record does not have, and read on from there: no reset of on_position_reset (%s) followed",
			u, c.led.subArmed[u], c.resetPolicy(sourceOf(u))))
	}
}

// resetPolicy is source's on_position_reset.
func (c *Cluster) resetPolicy(source string) actors.ResetPolicy {
	for _, sp := range c.specs {
		if sp.Name == source {
			return sp.OnPositionReset
		}
	}
	return actors.ResetEarliest
}
