package testkit

// What the scale mode (scale.go) counts while a cluster runs: lease
// statements, changes of hands, membership view changes and the time
// placement takes; and the memo of placement its nodes share.

import (
	"encoding/binary"
	"hash/fnv"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"
	"unsafe"

	"github.com/drover-dev/drover/actors/placement"
	"github.com/drover-dev/drover/persistence"
)

// scaleStats are the scale mode's counters. Nothing in them feeds back
// into the run: the digest is the same with or without them.
type scaleStats struct {
	leaseStmts int64             // lease statements the nodes issued
	owner      map[string]string // unit -> the process (name#sid) of its last acquisition
	moved      int               // acquisitions by another process than the last
	memo       placeMemo

	// Per node, the placement time of its current view: from one change
	// of its view to the next, what its supervisors spent computing
	// placement (the units they re-place because of the change, and the
	// reconciles the change brings about: units that stop, restarts).
	window  map[string]*time.Duration
	changes []time.Duration // the windows closed since the last take
}

func newScaleStats() *scaleStats {
	return &scaleStats{owner: map[string]string{}, window: map[string]*time.Duration{}, memo: placeMemo{entries: map[uint64][]*placeEntry{}}}
}

func (c *Cluster) countLease() {
	if c.scale != nil {
		c.scale.leaseStmts++
	}
}

// acquired counts a change of hands: an acquisition by another process
// than the last (a restarted node's are another process's).
func (s *scaleStats) acquired(l persistence.Lease, sid int) {
	who := l.Owner + "#" + strconv.Itoa(sid)
	if prev, ok := s.owner[l.Unit]; ok && prev != who {
		s.moved++
	}
	s.owner[l.Unit] = who
}

// viewChanged closes node's window and opens the next.
func (s *scaleStats) viewChanged(node string) {
	if w := s.window[node]; w != nil {
		s.changes = append(s.changes, *w)
	}
	s.window[node] = new(time.Duration)
}

// takeChanges closes every window and returns the windows closed since
// the last take: one per view change. Windows open again at the next
// change (placement computed meanwhile counts nowhere: none is due to a
// change).
func (s *scaleStats) takeChanges() []time.Duration {
	for _, node := range slices.Sorted(maps.Keys(s.window)) {
		s.changes = append(s.changes, *s.window[node])
		delete(s.window, node)
	}
	out := s.changes
	s.changes = nil
	return out
}

// placement is node's placement function: placement.Owned through the
// memo, its time added to node's window.
func (s *scaleStats) placement(node string) func(string, []string, []placement.Member, float64) []string {
	return func(self string, units []string, members []placement.Member, maxCapacity float64) []string {
		own, cost := s.memo.owned(self, units, members, maxCapacity)
		if w := s.window[node]; w != nil {
			*w += cost
		}
		return own
	}
}

// placeMemo remembers placements by their arguments. Every simulated node
// computes placement from its own view, and views agree most of the time:
// a hundred nodes compute the same placement a hundred times, which in one
// process on two cores is most of a large run. Placement is a pure
// function, so the memo's answer is the one placement.Owned gives; each
// caller is charged the time the computation took, as a real node (which
// computes it alone) would spend it.
type placeMemo struct {
	entries map[uint64][]*placeEntry
	fifo    []uint64 // keys in insertion order, for eviction: one per entry
	hashes  map[sliceID]uint64
	// computed and spent count the placements actually computed, and
	// their CPU time.
	computed int
	spent    time.Duration
}

// placeMemoSize bounds the memo: enough for the views of a rolling restart
// in flight, a few MB per entry at 5,000 units.
const placeMemoSize = 256

type placeEntry struct {
	units   []string
	members []placement.Member
	maxCap  float64
	owned   map[string][]string // member -> its units, sorted (placement.Owned)
	cost    time.Duration       // CPU time placement.Assign took (measure)
}

func (m *placeMemo) owned(self string, units []string, members []placement.Member, maxCapacity float64) ([]string, time.Duration) {
	e := m.assign(units, members, maxCapacity)
	return slices.Clone(e.owned[self]), e.cost
}

// assign is the memo's entry of placement.Assign(units, members,
// maxCapacity), computed if need be.
func (m *placeMemo) assign(units []string, members []placement.Member, maxCapacity float64) *placeEntry {
	key := placeKey(m.unitsHash(units), members, maxCapacity)
	for _, e := range m.entries[key] {
		if e.maxCap == maxCapacity && slices.Equal(e.units, units) && slices.EqualFunc(e.members, members, samePlaced) {
			return e
		}
	}
	var assign map[string]string
	cost := measure(func() { assign = placement.Assign(units, members, maxCapacity) })
	m.computed++
	m.spent += cost
	e := &placeEntry{units: slices.Clone(units), members: slices.Clone(members), maxCap: maxCapacity, owned: map[string][]string{}, cost: cost}
	for u, owner := range assign {
		e.owned[owner] = append(e.owned[owner], u)
	}
	for _, own := range e.owned {
		slices.Sort(own)
	}
	m.entries[key] = append(m.entries[key], e)
	m.fifo = append(m.fifo, key)
	if len(m.fifo) > placeMemoSize {
		old := m.fifo[0]
		m.fifo = m.fifo[1:]
		m.entries[old] = m.entries[old][1:]
		if len(m.entries[old]) == 0 {
			delete(m.entries, old)
		}
	}
	return e
}

// samePlaced reports whether two members are the same to placement.Assign
// (it reads these fields; Sources are the caller's business).
func samePlaced(a, b placement.Member) bool {
	return a.Name == b.Name && a.State == b.State && math.Float64bits(a.Capacity) == math.Float64bits(b.Capacity) &&
		a.Addr == b.Addr && a.DebugAddr == b.DebugAddr && a.Version == b.Version
}

// unitsHash hashes units, remembered by the slice's array and length:
// supervisors pass the same sorted slice until their units change, and
// hashing thousands of ids at every call was a large run's second cost. A
// slice changed in place keeps its old hash, which can only make a lookup
// miss (owned compares the units themselves), never answer wrongly.
func (m *placeMemo) unitsHash(units []string) uint64 {
	id := sliceID{unsafe.SliceData(units), len(units)}
	if h, ok := m.hashes[id]; ok {
		return h
	}
	h := fnv.New64a()
	for _, u := range units {
		h.Write([]byte(u))
		h.Write([]byte{0})
	}
	if m.hashes == nil || len(m.hashes) >= 4*placeMemoSize {
		m.hashes = map[sliceID]uint64{}
	}
	m.hashes[id] = h.Sum64()
	return m.hashes[id]
}

// sliceID is a slice's array and length. It keeps the array alive: an
// address is not reused for another slice while it is remembered.
type sliceID struct {
	data *string
	n    int
}

func placeKey(units uint64, members []placement.Member, maxCapacity float64) uint64 {
	h := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], units)
	h.Write(b[:])
	for _, m := range members {
		h.Write([]byte(m.Name))
		h.Write([]byte{0})
		h.Write([]byte(m.State))
		binary.LittleEndian.PutUint64(b[:], math.Float64bits(m.Capacity))
		h.Write(b[:])
	}
	binary.LittleEndian.PutUint64(b[:], math.Float64bits(maxCapacity))
	h.Write(b[:])
	return h.Sum64()
}

// measure is the CPU time f takes on this thread, or its wall time where
// the thread's CPU time cannot be read.
func measure(f func()) time.Duration {
	t0, ok := threadCPU()
	start := time.Now()
	f()
	if t1, ok1 := threadCPU(); ok && ok1 {
		return t1 - t0
	}
	return time.Since(start)
}
