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

// sampleView is the part of a cluster tree's JSON the history reads
// (addJSON): lag_seconds is read where a unit has it. The background
// sample reads the tree's structs instead (addTree).
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

// sample is one entry of the ring. Its slices are reused when the ring
// comes round to it (view copies them out under the mutex).
type sample struct {
	at      time.Time
	points  []namedPoint // sorted by source name
	moves   []Move
	dropped int
}

type namedPoint struct {
	source string
	p      Point
}

// history is a ring of the last samples; safe for concurrent use.
type history struct {
	every time.Duration

	mu   sync.Mutex
	ring []sample // len ≤ cap(ring); next is where the next one goes
	next int
	full bool
	// units is each unit's last sight, by unitKeyOf.
	units map[string]unitSeen
	last  time.Time // of the newest sample; zero before the first
	// gen counts the samples: a unit whose unitSeen.gen is the current
	// one is listed twice (it wraps after 2³² samples, far more than a
	// unit unseen for a window is remembered).
	gen   uint32
	nodes nodeNames
	buf   scratch // add's buffers, reused by every sample
}

// newHistory is a ring for samples every every (DefaultSampleEvery when
// not positive).
func newHistory(every time.Duration) *history {
	if every <= 0 {
		every = DefaultSampleEvery
	}
	n := int(HistoryWindow/every) + 1
	n = min(max(n, 2), maxSamples)
	return &history{every: every, ring: make([]sample, n), units: map[string]unitSeen{}}
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
		for _, np := range smp.points {
			j, ok := idx[np.source]
			if !ok {
				j = len(out.Sources)
				idx[np.source] = j
				out.Sources = append(out.Sources, SourceHistory{Name: np.source})
			}
			out.Sources[j].Points = append(out.Sources[j].Points, np.p)
		}
		out.Moves = append(out.Moves, smp.moves...)
		out.MovesDropped += smp.dropped
	}
	sort.SliceStable(out.Sources, func(i, j int) bool { return out.Sources[i].Name < out.Sources[j].Name })
	return out
}
