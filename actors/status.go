package actors

import (
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/drover-dev/drover/internal/mutate"
	"github.com/drover-dev/drover/persistence"
)

// Unit states (architecture §13; the names are part of the tree JSON
// Contract, architecture §10).
const (
	StateStarting  = "starting"
	StateAcquiring = "acquiring"
	StateRunning   = "running"
	StateRetrying  = "retrying"
	// StatePaused: an operator paused the unit or its source (drover
	// pause): it holds its lease and fetches nothing (controls.go).
	StatePaused   = "paused"
	StateStopping = "stopping"
	StateStopped  = "stopped"
)

// Tree is a node's actor tree in the JSON shape of architecture §10 (Contract).
type Tree struct {
	Node    string         `json:"node"`
	Members []MemberStatus `json:"members"`
	Sources []SourceStatus `json:"sources"`
	// Drained is true while the node is drained (drover drain): out of
	// placement, owning nothing, until undrained or told to exit.
	Drained bool `json:"drained,omitempty"`
	// Reload is the outcome of the node's last configuration reload;
	// nil before the first.
	Reload *ReloadStatus `json:"reload,omitempty"`
}

// ReloadStatus is the outcome of a configuration reload (SIGHUP, drover
// reload): when, whether it was applied in full, and why not; the sources
// it added, removed and changed (restarted with their new settings).
type ReloadStatus struct {
	At      time.Time `json:"at"`
	OK      bool      `json:"ok"`
	Error   string    `json:"error,omitempty"`
	Added   []string  `json:"added,omitempty"`
	Removed []string  `json:"removed,omitempty"`
	Changed []string  `json:"changed,omitempty"`
	// NotApplied are the sources whose change the file asks for and the
	// reload did not make (Error says why); the others' changes stand (a
	// reload is not rolled back).
	NotApplied []string `json:"not_applied,omitempty"`
	// Stopping are the sources whose removal (a removed source, or the
	// old settings of a changed one) began and had not ended when the
	// reload answered: their units still hand over, their source shows
	// stopping. The node no longer places them; the removal ends by
	// itself (a removed source then moves to Removed) and the next reload
	// waits for it (a changed source's new settings start then).
	Stopping []string `json:"stopping,omitempty"`
}

// Summary says what a reload did, for a person (drover reload's answer,
// the audit row, drover tree): "reloaded: added a; removed b",
// "reloaded: no source changed", or, when it did not apply in full,
// "reload incomplete: added a; not applied c; still stopping c; error: …".
func (r ReloadStatus) Summary() string {
	var parts []string
	for _, p := range []struct {
		what  string
		names []string
	}{{"added", r.Added}, {"removed", r.Removed}, {"changed", r.Changed}, {"not applied", r.NotApplied}, {"still stopping", r.Stopping}} {
		if len(p.names) > 0 {
			parts = append(parts, p.what+" "+strings.Join(p.names, ", "))
		}
	}
	if r.Error != "" {
		return "reload incomplete: " + strings.Join(append(parts, "error: "+r.Error), "; ")
	}
	if len(parts) == 0 {
		return "reloaded: no source changed"
	}
	return "reloaded: " + strings.Join(parts, "; ")
}

// MemberStatus is one member as this node sees it.
type MemberStatus struct {
	Name  string `json:"name"`
	Addr  string `json:"addr"`
	State string `json:"state"`
}

// SourceStatus is one source supervisor.
type SourceStatus struct {
	Name  string       `json:"name"`
	Type  string       `json:"type"`
	State string       `json:"state"`
	Units []UnitStatus `json:"units"`
	// Error is the last discovery error, if any.
	Error string `json:"error,omitempty"`
	// Quality is the last closed quality window of this source on this node.
	Quality *QualitySummary `json:"quality,omitempty"`
}

// QualitySummary is the tree's view of a quality window.
type QualitySummary struct {
	WindowStart time.Time `json:"window_start"`
	WindowEnd   time.Time `json:"window_end"`
	RowsRead    int64     `json:"rows_read"`
	RowsFailed  int64     `json:"rows_failed"`
	Status      string    `json:"status"`
	Drift       int       `json:"drift"`
}

// UnitStatus is one unit actor. Field names are a Contract.
type UnitStatus struct {
	Unit           string     `json:"unit"`
	Node           string     `json:"node"`
	State          string     `json:"state"`
	LeaseToken     int64      `json:"lease_token"`
	LeaseExpiresAt *time.Time `json:"lease_expires_at"`
	Position       string     `json:"position"`
	Lag            int64      `json:"lag"`
	Received       int64      `json:"received"`
	Applied        int64      `json:"applied"`
	Acked          int64      `json:"acked"`
	Rejected       int64      `json:"rejected"`
	DeadLettered   int64      `json:"dead_lettered"`
	Restarts       int64      `json:"restarts"`
	LastPullAt     *time.Time `json:"last_pull_at"`
	LastError      string     `json:"last_error"`
	// LastErrorAt is when LastError was set: a unit running again keeps its
	// last error, recognisable as old by its time.
	LastErrorAt *time.Time `json:"last_error_at"`
	NextRetryAt *time.Time `json:"next_retry_at"`
	// LagSeconds is the age of the oldest message the unit has not applied,
	// as of the snapshot (Lag.Seconds): -1 when the broker cannot say.
	LagSeconds float64 `json:"lag_seconds"`

	// Passive: the unit is idle without an actor of its own (passivated,
	// architecture §13); it shows what it showed when it passivated.
	Passive bool `json:"passive,omitempty"`
	// LastSeek is the last seek this unit's owner carried out here
	// (drover seek); nil when none was. Replaced whole, never changed.
	LastSeek *SeekStatus `json:"last_seek,omitempty"`
}

// SeekStatus is a seek as the tree shows it.
type SeekStatus struct {
	// To is the target as asked ("earliest", "after:41", a time, ...).
	To string `json:"to"`
	// From is the checkpoint before the seek, Position the one written.
	From     string    `json:"from"`
	Position string    `json:"position"`
	At       time.Time `json:"at"`
	By       string    `json:"by,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	// ID is the control's id (the controls table's seek_id), 0 when the
	// seek came without one.
	ID int64 `json:"id,omitempty"`
	// Token is the lease token the checkpoint was written under.
	Token int64 `json:"token"`
	// Error says why the broker refused it (the checkpoint was not
	// moved; a control-row seek refused is marked done, not retried).
	Error string `json:"error,omitempty"`
}

// registry holds the live status of a node's sources and units. Actors
// write their own entries; the debug endpoint reads snapshots from any
// goroutine.
type registry struct {
	mu      sync.Mutex
	node    string
	sources map[string]*sourceEntry
	order   []string
	gens    uint64 // unit generations handed out (addUnit)
	// states counts the changes of what UnitStates shows: the sources,
	// their states, the unit entries and their states.
	states uint64
	// retryLogs rate-limits each unit's WARN lines about retrying, across
	// the unit's restarts (by unit id).
	retryLogs map[string]*logGate
	// stateChanged, when set (Metrics.UnitState), is told each change of
	// a unit entry's state.
	stateChanged func(source, unit, state string)
	// now, when set (the node's clock), is when a snapshot measures the
	// units' lag_seconds; nil measures at the zero time.
	now func() time.Time
	// entries hands out the unit entries (addUnit).
	entries entrySlab
}

// entrySlab hands out unit entries from arrays of entryChunk, reusing
// those given back (under registry.mu; an entry never leaves the lock).
// An entry outlives everything else a unit allocates while it starts: one
// malloc per entry scattered them over spans that the start-up's
// short-lived objects then left mostly empty, and a span with one entry
// in it stays in use (issue 12 item 5).
type entrySlab struct {
	chunk []unitEntry
	free  []*unitEntry
}

const entryChunk = 64

func (p *entrySlab) get() *unitEntry {
	if n := len(p.free); n > 0 {
		e := p.free[n-1]
		p.free = p.free[:n-1]
		return e
	}
	if len(p.chunk) == 0 {
		p.chunk = make([]unitEntry, entryChunk)
	}
	e := &p.chunk[0]
	p.chunk = p.chunk[1:]
	return e
}

func (p *entrySlab) put(e *unitEntry) {
	*e = unitEntry{}
	p.free = append(p.free, e)
}

type logGate struct {
	at      time.Time
	skipped int
}

// retryLog reports whether a unit's WARN line about retrying may be
// written at now (at most one per every), and how many were left out
// since the last one.
func (r *registry) retryLog(unit string, now time.Time, every time.Duration) (bool, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.retryLogs == nil {
		r.retryLogs = map[string]*logGate{}
	}
	g, ok := r.retryLogs[unit]
	if ok && now.Sub(g.at) < every {
		g.skipped++
		return false, 0
	}
	if !ok {
		g = &logGate{}
		r.retryLogs[unit] = g
	}
	skipped := g.skipped
	g.at, g.skipped = now, 0
	return true, skipped
}

type sourceEntry struct {
	status  SourceStatus
	units   map[string]*unitEntry
	quality *persistence.QualityWindow
}

// unitEntry is the status of one child of a supervisor instance. gen tells
// the children apart: a restarted supervisor forgets its units while they
// are still stopping, and the next instance may run a unit of the same id
// before the last write of the old one arrives (the leaser's, say).
type unitEntry struct {
	status treeUnit
	gen    uint64
}

func newRegistry(node string) *registry {
	return &registry{node: node, sources: map[string]*sourceEntry{}}
}

func (r *registry) addSource(name, typ string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.sources[name]; !ok {
		r.sources[name] = &sourceEntry{status: SourceStatus{Name: name, Type: typ, State: StateStarting}, units: map[string]*unitEntry{}}
		r.order = append(r.order, name)
		r.states++
	}
}

func (r *registry) source(name string, f func(*SourceStatus)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.sources[name]; ok {
		was := s.status.State
		f(&s.status)
		if s.status.State != was {
			r.states++
		}
	}
}

func (r *registry) setQuality(name string, w persistence.QualityWindow) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.sources[name]; ok {
		s.quality = &w
	}
}

// addUnit creates the entry of a unit a supervisor spawns now, replacing
// any other, and returns its generation: only the writes that carry it
// reach the entry. It is the only way an entry is created.
func (r *registry) addUnit(source, unit string) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.sources[source]
	if !ok {
		return 0
	}
	r.gens++
	r.states++
	if old, ok := s.units[unit]; ok {
		r.entries.put(old)
	}
	e := r.entries.get()
	*e = unitEntry{status: newTreeUnit(), gen: r.gens}
	s.units[unit] = e
	r.noteState(source, unit, StateStarting)
	return r.gens
}

// noteState tells stateChanged, if set, the state a unit's entry shows
// now (under r.mu: the calls for one unit come in the order of its writes).
func (r *registry) noteState(source, unit, state string) {
	if r.stateChanged != nil {
		r.stateChanged(source, unit, state)
	}
}

// unit updates the status of the unit of generation gen. A write for an
// entry that is gone (the unit's supervisor forgot it) or of another
// generation is dropped: it must not bring back an entry no one removes.
func (r *registry) unit(source, unit string, gen uint64, f func(*treeUnit)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.sources[source]
	if !ok {
		return
	}
	e, ok := s.units[unit]
	if mutate.On(mutate.GhostUnits) {
		// the bug: any write creates the entry, and reaches whichever there is
		if !ok {
			e = &unitEntry{status: newTreeUnit()}
			s.units[unit] = e
		}
		f(&e.status)
		r.states++
		return
	}
	if !ok || e.gen != gen {
		return
	}
	was := e.status.state
	f(&e.status)
	if e.status.state != was {
		r.states++
		if !mutate.On(mutate.StaleStateMetrics) {
			r.noteState(source, unit, e.status.stateName())
		}
	}
}

// leaseRenewed records a renewed lease's expiry in the unit's entry if the
// entry shows that lease (token): the leaser knows units by lease, not by
// generation, and a token is never reused.
func (r *registry) leaseRenewed(source, unit string, token int64, exp time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.sources[source]
	if !ok {
		return
	}
	if e, ok := s.units[unit]; ok && e.status.leaseToken == token {
		e.status.leaseExpires = stampOf(exp)
	}
}

// removeSource drops a source's entry (a source removed at run time):
// writes of its units that still arrive find no entry and are dropped.
func (r *registry) removeSource(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.sources[name]; !ok {
		return
	}
	delete(r.sources, name)
	r.order = slices.DeleteFunc(r.order, func(n string) bool { return n == name })
	r.states++
}

// removeUnit drops the entry of the unit of generation gen.
func (r *registry) removeUnit(source, unit string, gen uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.sources[source]; ok {
		if e, ok := s.units[unit]; ok && (e.gen == gen || mutate.On(mutate.GhostUnits)) {
			delete(s.units, unit)
			r.entries.put(e)
			r.states++
		}
	}
}

func (r *registry) snapshot() []SourceStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]SourceStatus, 0, len(r.order))
	var now time.Time
	if r.now != nil {
		now = r.now()
	}
	var times treeTimes
	for _, name := range r.order {
		s := r.sources[name]
		ss := s.status
		ss.Units = make([]UnitStatus, 0, len(s.units))
		for id, u := range s.units {
			ss.Units = append(ss.Units, u.status.status(id, r.node, now, &times))
		}
		sort.Slice(ss.Units, func(i, j int) bool { return unitLess(ss.Units[i].Unit, ss.Units[j].Unit) })
		if q := s.quality; q != nil {
			ss.Quality = &QualitySummary{WindowStart: q.WindowStart, WindowEnd: q.WindowEnd, RowsRead: q.RowsRead,
				RowsFailed: q.RowsFailed, Status: q.Status, Drift: len(q.Drift)}
		}
		out = append(out, ss)
	}
	return out
}

// unitLess orders unit ids naturally: "src/2" before "src/10".
func unitLess(a, b string) bool {
	if len(a) != len(b) {
		// same prefix, numeric suffixes of different length
		i := 0
		for i < len(a) && i < len(b) && a[i] == b[i] {
			i++
		}
		if isDigits(a[i:]) && isDigits(b[i:]) {
			return len(a) < len(b)
		}
	}
	return a < b
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
