package debug

import (
	"slices"
	"strings"
	"time"

	"github.com/drover-dev/drover/actors"
)

// A background sample of an idle node's 10,000 units made 4.3 MB of
// garbage per sample (a map of candidates per unit, a per-source map, a
// copy of the tree): add keeps its buffers in the history instead, and
// reads a unit's candidates from one map only for the units that two
// nodes list (BenchmarkHistoryAdd, TestHistoryAddAllocatesNothingPerUnit).

// unitSeen is a unit as last sampled: 24 bytes.
type unitSeen struct {
	applied int64
	at      int64  // Unix nanoseconds: 16 bytes less per unit than a time.Time
	node    uint32 // in history.nodes; noNode while a unit's first sample is added
	gen     uint32 // the sample that last listed it
}

const noNode = ^uint32(0)

// unitKeyOf is the key of a unit in history.units: its id alone when it
// starts with "<source>/" and the source has no '/' (as every drover
// unit's does: actors/unit.go, and config's source names), as the id then
// names its source: the text before its first '/'. Any other id is keyed
// by its source, a NUL and the id, which no such id can equal without a
// NUL of its own; that key is made anew each time.
func unitKeyOf(source, unit string) string {
	if strings.HasPrefix(unit, source) && len(unit) > len(source) && unit[len(source)] == '/' && strings.IndexByte(source, '/') < 0 {
		return unit
	}
	return source + "\x00" + unit
}

// nodeNames interns the node names the units were last seen on: a unit
// keeps 4 bytes instead of a string. A name no unit refers to any more is
// forgotten (prune) and its index reused.
type nodeNames struct {
	names []string
	index map[string]uint32
	free  []uint32
	refs  []int // prune's counts, reused
}

func (n *nodeNames) intern(name string) uint32 {
	if i, ok := n.index[name]; ok {
		return i
	}
	if n.index == nil {
		n.index = map[string]uint32{}
	}
	var i uint32
	if k := len(n.free); k > 0 {
		i, n.free = n.free[k-1], n.free[:k-1]
		n.names[i] = name
	} else {
		i = uint32(len(n.names))
		n.names = append(n.names, name)
	}
	n.index[name] = i
	return i
}

// counts are zeroed counts of the units on each name, for prune.
func (n *nodeNames) counts() []int {
	n.refs = append(n.refs[:0], make([]int, len(n.names))...)
	return n.refs
}

// prune forgets the names that counts found no unit on.
func (n *nodeNames) prune() {
	for name, i := range n.index {
		if n.refs[i] == 0 {
			delete(n.index, name)
			n.names[i] = ""
			n.free = append(n.free, i)
		}
	}
}

// listing is one node's entry of a unit in a sample.
type listing struct {
	key, unit string
	applied   int64
	lag       float64 // below 0 (or NaN): no data
	node      uint32
	src       int // in scratch.accs
}

// acc is one source's sums over a sample.
type acc struct {
	name  string
	sum   float64
	rated bool
	lag   float64 // the largest; -1 while none
	units int
}

// scratch is what one add works in. The small parts are kept for the
// next; the two that grow with the units (list, local) are dropped after
// each sample: kept, they were 116 live bytes per unit between samples
// 5 s apart (an idle node's resident heap is its live heap plus the
// collector's headroom), for 1 MB of garbage per sample saved. list is
// made at the last sample's size: one allocation.
type scratch struct {
	list     []listing
	lastList int // len(list) at the end of the last sample
	accs     []acc
	srcs     map[string]int // in accs, by name
	dups     map[string]dup // the units listed more than once, by key
}

// dup is a unit listed by more than one node: which listing counts.
type dup struct {
	chosen int // in scratch.list; -1 before the first
	done   bool
}

// begin starts the listings of a sample.
func (b *scratch) begin() {
	b.list, b.accs = make([]listing, 0, b.lastList), b.accs[:0]
	if b.srcs == nil {
		b.srcs, b.dups = map[string]int{}, map[string]dup{}
	}
	clear(b.srcs)
	clear(b.dups)
}

// source is the index of a source's sums, made on its first listing: a
// source that a node lists counts in the sample, even without units.
func (b *scratch) source(name string) int {
	if i, ok := b.srcs[name]; ok {
		return i
	}
	b.srcs[name] = len(b.accs)
	b.accs = append(b.accs, acc{name: name, lag: -1})
	return len(b.accs) - 1
}

// listUnits lists one node's units of a source, read by of.
func listUnits[U any](b *scratch, node uint32, source string, units []U, of func(*U) (unit string, applied int64, lag float64)) {
	src := b.source(source)
	for i := range units {
		unit, applied, lag := of(&units[i])
		b.list = append(b.list, listing{key: unitKeyOf(source, unit), unit: unit, applied: applied, lag: lag, node: node, src: src})
	}
}

// jsonUnit reads a unit of the JSON: a unit without lag_seconds has none.
func jsonUnit(u *sampleUnit) (string, int64, float64) {
	if u.LagSeconds == nil {
		return u.Unit, u.Applied, -1
	}
	return u.Unit, u.Applied, *u.LagSeconds
}

func treeUnit(u *actors.UnitStatus) (string, int64, float64) {
	return u.Unit, u.Applied, u.LagSeconds
}

func counterUnit(u *actors.UnitCounters) (string, int64, float64) {
	return u.Unit, u.Applied, u.LagSeconds
}

// add records the sample of now, decoded from a cluster tree's JSON.
func (h *history) add(now time.Time, v sampleView) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.begin(now) {
		return
	}
	for _, n := range v.Nodes {
		if n.Error == "" {
			node := h.nodes.intern(n.Node)
			for _, s := range n.Sources {
				listUnits(&h.buf, node, s.Name, s.Units, jsonUnit)
			}
		}
	}
	h.record(now)
}

// addTree records the sample of now read from a cluster tree's structs
// (the background sample: marshalling and decoding 10,000 units was a
// quarter of an idle node's CPU). With local, ct.Nodes[self] is only this
// node's name and its units are read from local's counters (a lazy
// flight). A lag_seconds below 0 is unknown, as in the JSON.
func (h *history) addTree(now time.Time, ct ClusterTree, self int, local CounterReader) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.begin(now) {
		return
	}
	for i, n := range ct.Nodes {
		switch {
		case n.Error != "":
		case local != nil && i == self:
			node := h.nodes.intern(n.Node)
			for _, s := range local.Counters(nil) {
				listUnits(&h.buf, node, s.Name, s.Units, counterUnit)
			}
		default:
			node := h.nodes.intern(n.Node)
			for _, s := range n.Sources {
				listUnits(&h.buf, node, s.Name, s.Units, treeUnit)
			}
		}
	}
	h.record(now)
}

// begin starts the sample of now, unless there is one of now already or
// later (one sample per instant, and the clock does not go back).
func (h *history) begin(now time.Time) bool {
	if !h.last.IsZero() && !now.After(h.last) {
		return false
	}
	h.buf.begin()
	return true
}

// record adds the sample of now from the listings in h.buf. Rates come
// from each unit's applied counter: the growth on the node that held it
// at the last sample; a counter that went down (the unit restarted) or a
// unit now on another node (it moved: its new owner counts from zero)
// counts whole; a unit never seen before is a baseline only. A unit
// listed by two nodes (a handover in progress) counts once, where it was
// before, or on the first that lists it.
func (h *history) record(now time.Time) {
	var dt float64
	if !h.last.IsZero() {
		dt = now.Sub(h.last).Seconds()
	}
	h.gen++
	b := &h.buf
	// First pass: mark each unit as listed by this sample; a unit marked
	// already is listed twice.
	for _, l := range b.list {
		seen, ok := h.units[l.key]
		if ok && seen.gen == h.gen {
			b.dups[l.key] = dup{chosen: -1}
			continue
		}
		if !ok {
			seen.node = noNode
		}
		seen.gen = h.gen
		h.units[l.key] = seen
	}
	b.choose(h.units)
	smp := &h.ring[h.next]
	smp.at, smp.points, smp.moves, smp.dropped = now, smp.points[:0], smp.moves[:0], 0
	nowNano := now.UnixNano()
	for i := range b.list {
		c := &b.list[i]
		if len(b.dups) > 0 {
			if d, ok := b.dups[c.key]; ok {
				if d.done {
					continue
				}
				b.dups[c.key] = dup{chosen: d.chosen, done: true}
				c = &b.list[d.chosen]
			}
		}
		seen := h.units[c.key]
		before := seen.node != noNode
		a := &b.accs[c.src]
		a.units++
		if c.lag >= 0 && c.lag > a.lag {
			a.lag = c.lag
		}
		if before && dt > 0 {
			delta := c.applied
			if c.node == seen.node && c.applied >= seen.applied {
				delta = c.applied - seen.applied
			}
			a.sum += float64(delta)
			a.rated = true
		}
		if before && c.node != seen.node {
			if len(smp.moves) < maxMovesPerSample {
				smp.moves = append(smp.moves, Move{At: now, Source: a.name, Unit: c.unit, From: h.nodes.names[seen.node], To: h.nodes.names[c.node]})
			} else {
				smp.dropped++
			}
		}
		h.units[c.key] = unitSeen{applied: c.applied, at: nowNano, node: c.node, gen: h.gen}
	}
	for _, a := range b.accs {
		p := Point{At: now, Units: a.units}
		if a.lag >= 0 {
			l := a.lag
			p.LagSeconds = &l
		}
		if a.rated {
			r := a.sum / dt
			p.AppliedPerSec = &r
		}
		smp.points = append(smp.points, namedPoint{source: a.name, p: p})
	}
	slices.SortFunc(smp.points, func(x, y namedPoint) int { return strings.Compare(x.source, y.source) })
	// A unit unseen for a whole window is forgotten: the map stays as
	// large as the units of the last window, and so does the table of
	// the nodes they were on.
	refs := h.nodes.counts()
	for k, u := range h.units {
		if now.Sub(time.Unix(0, u.at)) > HistoryWindow {
			delete(h.units, k)
			continue
		}
		refs[u.node]++
	}
	h.nodes.prune()
	h.next = (h.next + 1) % len(h.ring)
	if h.next == 0 {
		h.full = true
	}
	h.last = now
	b.lastList, b.list = len(b.list), nil
}

// choose picks, for each unit listed more than once, the listing that
// counts: the first on the node the unit was on at the last sample, else
// the first (units holds the last sample's sight of each, but for gen).
func (b *scratch) choose(units map[string]unitSeen) {
	if len(b.dups) == 0 {
		return
	}
	for i, l := range b.list {
		d, ok := b.dups[l.key]
		if !ok {
			continue
		}
		seen := units[l.key]
		switch {
		case d.chosen < 0:
			d.chosen = i
		case seen.node != noNode && l.node == seen.node && b.list[d.chosen].node != seen.node:
			d.chosen = i
		default:
			continue
		}
		b.dups[l.key] = d
	}
}
