package debug

import (
	"encoding/json"
	"sort"
	"sync"
	"time"
)

// History defaults (Config.SampleEvery) and bounds.
const (
	// HistoryWindow is how far back GET /debug/history reaches.
	HistoryWindow = 10 * time.Minute
	// DefaultSampleEvery is the cadence of the cluster samples: one
	// cluster fan-out per SampleEvery (shared with the page's polls, see
	// clusterJSON), 120 samples per HistoryWindow.
	DefaultSampleEvery = 5 * time.Second
	// maxSamples bounds the ring whatever SampleEvery says.
	maxSamples = 1200
	// maxMovesPerSample bounds the moves recorded in one sample (a node
	// of thousands of units that dies moves them all at once); the others
	// are counted in MovesDropped.
	maxMovesPerSample = 64
)

// History is the JSON of GET /debug/history: per source, the cluster's
// applied messages per second and its largest lag_seconds, one point per
// sample over the last HistoryWindow, and the units that moved.
type History struct {
	// Now is the server's time of the answer: the end of the window
	// (the page draws against it, not against its own clock).
	Now           time.Time       `json:"now"`
	WindowSeconds float64         `json:"window_seconds"`
	EverySeconds  float64         `json:"every_seconds"`
	Sources       []SourceHistory `json:"sources"`
	// Moves are the units whose node changed between two samples, oldest
	// first.
	Moves []Move `json:"moves"`
	// MovesDropped counts the moves left out of Moves (more than
	// maxMovesPerSample in one sample).
	MovesDropped int `json:"moves_dropped"`
}

// SourceHistory is one source's points, oldest first.
type SourceHistory struct {
	Name   string  `json:"name"`
	Points []Point `json:"points"`
}

// Point is one source in one sample.
type Point struct {
	At time.Time `json:"at"`
	// AppliedPerSec is the messages applied since the sample before,
	// summed over the source's units, per second; null for the first
	// sample, or when no unit of the source was seen before.
	AppliedPerSec *float64 `json:"applied_per_sec"`
	// LagSeconds is the largest lag_seconds of the source's units; null
	// when no unit reports one (a unit without the field, or with -1: the
	// broker cannot know).
	LagSeconds *float64 `json:"lag_seconds"`
	// Units is how many of the source's units the sample saw.
	Units int `json:"units"`
}

// Move is a unit seen on From at one sample and on To at a later one.
type Move struct {
	At     time.Time `json:"at"`
	Source string    `json:"source"`
	Unit   string    `json:"unit"`
	From   string    `json:"from"`
	To     string    `json:"to"`
}

// sampleView is the part of a cluster tree the history reads, taken from
// the tree (viewOf) or decoded from its JSON (addJSON): lag_seconds is
// read where a unit has it.
type sampleView struct {
	Nodes []sampleNode `json:"nodes"`
}

type sampleNode struct {
	Node    string         `json:"node"`
	Error   string         `json:"error"`
	Sources []sampleSource `json:"sources"`
}

type sampleSource struct {
	Name  string       `json:"name"`
	Units []sampleUnit `json:"units"`
}

type sampleUnit struct {
	Unit       string   `json:"unit"`
	Applied    int64    `json:"applied"`
	LagSeconds *float64 `json:"lag_seconds"`
}

// sample is one entry of the ring.
type sample struct {
	at      time.Time
	points  map[string]Point // by source
	moves   []Move
	dropped int
}

// unitKey names a unit across sources.
type unitKey struct{ source, unit string }

// unitSeen is a unit as last sampled.
type unitSeen struct {
	node    string
	applied int64
	at      int64 // Unix nanoseconds: 16 bytes less per unit than a time.Time
}

// history is a ring of the last samples; safe for concurrent use.
type history struct {
	every time.Duration

	mu    sync.Mutex
	ring  []sample // len ≤ cap(ring); next is where the next one goes
	next  int
	full  bool
	units map[unitKey]unitSeen
	last  time.Time // of the newest sample; zero before the first
}

// newHistory is a ring for samples every every (DefaultSampleEvery when
// not positive).
func newHistory(every time.Duration) *history {
	if every <= 0 {
		every = DefaultSampleEvery
	}
	n := int(HistoryWindow/every) + 1
	n = min(max(n, 2), maxSamples)
	return &history{every: every, ring: make([]sample, n), units: map[unitKey]unitSeen{}}
}

// addJSON decodes a cluster tree's JSON and adds it as the sample of now.
func (h *history) addJSON(now time.Time, body []byte) error {
	var v sampleView
	if err := json.Unmarshal(body, &v); err != nil {
		return err
	}
	h.add(now, v)
	return nil
}

// viewOf is the part of ct the history reads, taken from the structs (a
// background sample of 10,000 units marshalled and decoded the tree every
// time: a quarter of an idle node's CPU). A lag_seconds below 0 is unknown,
// as in the JSON.
func viewOf(ct ClusterTree) sampleView {
	v := sampleView{Nodes: make([]sampleNode, len(ct.Nodes))}
	for i, n := range ct.Nodes {
		sn := sampleNode{Node: n.Node, Error: n.Error, Sources: make([]sampleSource, len(n.Sources))}
		for j, src := range n.Sources {
			ss := sampleSource{Name: src.Name, Units: make([]sampleUnit, len(src.Units))}
			for k, u := range src.Units {
				ss.Units[k] = sampleUnit{Unit: u.Unit, Applied: u.Applied}
				if u.LagSeconds >= 0 {
					lag := u.LagSeconds
					ss.Units[k].LagSeconds = &lag
				}
			}
			sn.Sources[j] = ss
		}
		v.Nodes[i] = sn
	}
	return v
}

// candidate is one node's entry of a unit in a sample.
type candidate struct {
	node    string
	applied int64
	lag     *float64
}

// add records the sample of now. Rates come from each unit's applied
// counter: the growth on the node that held it at the last sample; a
// counter that went down (the unit restarted) or a unit now on another
// node (it moved: its new owner counts from zero) counts whole; a unit
// never seen before is a baseline only. A unit listed by two nodes (a
// handover in progress) counts where it was before.
func (h *history) add(now time.Time, v sampleView) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.last.IsZero() && !now.After(h.last) {
		return // the clock did not move: one sample per instant
	}
	var dt float64
	if !h.last.IsZero() {
		dt = now.Sub(h.last).Seconds()
	}
	type acc struct {
		sum     float64
		rated   bool
		lag     *float64
		units   int
		present bool
	}
	bySource := map[string]*acc{}
	cands := map[unitKey][]candidate{}
	var order []unitKey
	for _, n := range v.Nodes {
		if n.Error != "" {
			continue
		}
		for _, s := range n.Sources {
			if bySource[s.Name] == nil {
				bySource[s.Name] = &acc{}
			}
			bySource[s.Name].present = true
			for _, u := range s.Units {
				k := unitKey{s.Name, u.Unit}
				if _, ok := cands[k]; !ok {
					order = append(order, k)
				}
				cands[k] = append(cands[k], candidate{n.Node, u.Applied, u.LagSeconds})
			}
		}
	}
	smp := sample{at: now, points: make(map[string]Point, len(bySource))}
	for _, k := range order {
		cs := cands[k]
		seen, ok := h.units[k]
		c := cs[0]
		for _, x := range cs {
			if ok && x.node == seen.node {
				c = x
				break
			}
		}
		a := bySource[k.source]
		a.units++
		if c.lag != nil && *c.lag >= 0 && (a.lag == nil || *c.lag > *a.lag) {
			l := *c.lag
			a.lag = &l
		}
		if ok && dt > 0 {
			delta := c.applied
			if c.node == seen.node && c.applied >= seen.applied {
				delta = c.applied - seen.applied
			}
			a.sum += float64(delta)
			a.rated = true
		}
		if ok && c.node != seen.node {
			if len(smp.moves) < maxMovesPerSample {
				smp.moves = append(smp.moves, Move{At: now, Source: k.source, Unit: k.unit, From: seen.node, To: c.node})
			} else {
				smp.dropped++
			}
		}
		h.units[k] = unitSeen{node: c.node, applied: c.applied, at: now.UnixNano()}
	}
	for name, a := range bySource {
		p := Point{At: now, LagSeconds: a.lag, Units: a.units}
		if a.rated {
			r := a.sum / dt
			p.AppliedPerSec = &r
		}
		smp.points[name] = p
	}
	// A unit unseen for a whole window is forgotten: the map stays as
	// large as the units of the last window.
	for k, u := range h.units {
		if now.Sub(time.Unix(0, u.at)) > HistoryWindow {
			delete(h.units, k)
		}
	}
	h.ring[h.next] = smp
	h.next = (h.next + 1) % len(h.ring)
	if h.next == 0 {
		h.full = true
	}
	h.last = now
}

// view is the history as of now: the samples of the last HistoryWindow.
func (h *history) view(now time.Time) History {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := History{Now: now, WindowSeconds: HistoryWindow.Seconds(), EverySeconds: h.every.Seconds(), Sources: []SourceHistory{}, Moves: []Move{}}
	idx := map[string]int{}
	start, n := 0, h.next
	if h.full {
		start, n = h.next, len(h.ring)
	}
	for i := range n {
		smp := h.ring[(start+i)%len(h.ring)]
		if now.Sub(smp.at) > HistoryWindow {
			continue
		}
		names := make([]string, 0, len(smp.points))
		for name := range smp.points {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			j, ok := idx[name]
			if !ok {
				j = len(out.Sources)
				idx[name] = j
				out.Sources = append(out.Sources, SourceHistory{Name: name})
			}
			out.Sources[j].Points = append(out.Sources[j].Points, smp.points[name])
		}
		out.Moves = append(out.Moves, smp.moves...)
		out.MovesDropped += smp.dropped
	}
	sort.SliceStable(out.Sources, func(i, j int) bool { return out.Sources[i].Name < out.Sources[j].Name })
	return out
}
