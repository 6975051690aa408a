package metrics

import (
	"math"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/drover-dev/drover/actors"
)

// unitSeries collects drover_unit_lag_messages, drover_unit_lag_seconds
// and drover_unit_state, and the per-source maxima of the lags
// (drover_source_lag_messages, drover_source_lag_seconds): one small entry
// per unit, from which a scrape makes the series. A GaugeVec child per
// series (its label pairs, hashes and metric) cost about 1 KB per unit on
// an idle node of 10,000 units; an entry here 48 bytes of map slot: the
// source and the state as small numbers into lists of names, the lag's
// time as Unix nanoseconds (issue 12 item 5). lag_seconds is measured at
// the scrape, against the node's clock, so a stuck unit's grows between
// its fetches.
type unitSeries struct {
	lagMsgs, lagSecs, state *prometheus.Desc
	maxMsgs, maxSecs        *prometheus.Desc
	now                     func() time.Time

	mu      sync.Mutex
	units   map[unitKey]unitEntry
	sources []string          // unitKey.source indexes it
	srcIdx  map[string]uint32 // sources' indexes by name
	states  []string          // unitEntry.state-1 indexes it
}

type unitKey struct {
	unit   string
	source uint32
}

type unitEntry struct {
	msgs   int64 // the lag's Messages
	oldest int64 // the lag's Oldest, Unix nanoseconds, when dated
	dated  bool  // the lag's Oldest is not zero (zero: caught up)
	known  bool  // the lag's Known
	hasLag bool  // a fetch reported the lag
	state  uint8 // 1 + the index in states of what drover_unit_state shows; 0 none yet
}

// lag is the entry's lag again.
func (e unitEntry) lag() actors.Lag {
	l := actors.Lag{Messages: e.msgs, Known: e.known}
	if e.dated {
		l.Oldest = time.Unix(0, e.oldest)
	}
	return l
}

// key is the map key of a unit (under mu): the source's index is made
// when the source is first seen.
func (s *unitSeries) key(source, unit string) unitKey {
	i, ok := s.srcIdx[source]
	if !ok {
		i = uint32(len(s.sources))
		s.sources = append(s.sources, source)
		s.srcIdx[source] = i
	}
	return unitKey{unit: unit, source: i}
}

func newUnitSeries(constLabels prometheus.Labels, now func() time.Time) *unitSeries {
	unit := []string{LabelSource, LabelUnit}
	source := []string{LabelSource}
	return &unitSeries{
		lagMsgs: prometheus.NewDesc("drover_unit_lag_messages",
			"Messages the broker holds beyond the unit's last fetch, as of that fetch; -1 when the broker cannot count them.",
			unit, constLabels),
		lagSecs: prometheus.NewDesc("drover_unit_lag_seconds",
			"Age of the oldest message the unit has not applied, at the scrape; 0 when caught up, -1 when the broker cannot tell.",
			unit, constLabels),
		state: prometheus.NewDesc("drover_unit_state",
			"1 for the state the unit's tree entry shows (starting, acquiring, running, retrying, stopping, stopped); one series per unit.",
			[]string{LabelSource, LabelUnit, LabelState}, constLabels),
		maxMsgs: prometheus.NewDesc("drover_source_lag_messages",
			"The largest drover_unit_lag_messages of the source's units on this node; -1 when none is known.",
			source, constLabels),
		maxSecs: prometheus.NewDesc("drover_source_lag_seconds",
			"The largest drover_unit_lag_seconds of the source's units on this node (what an autoscaler reads); -1 when none is known.",
			source, constLabels),
		now:    now,
		units:  map[unitKey]unitEntry{},
		srcIdx: map[string]uint32{},
	}
}

// valid reports whether Prometheus takes the label values.
func valid(values ...string) bool {
	for _, v := range values {
		if !utf8.ValidString(v) {
			return false
		}
	}
	return true
}

func (s *unitSeries) setLag(source, unit string, lag actors.Lag) {
	if !valid(source, unit) {
		return
	}
	if lag.Messages < 0 {
		lag.Messages = -1
	}
	var oldest int64
	if !lag.Oldest.IsZero() {
		// Unix nanoseconds reach from 1678 to 2262; a stamp beyond is
		// held at the bound (its lag is centuries either way)
		switch t := lag.Oldest; {
		case t.Before(time.Unix(0, math.MinInt64+1)):
			oldest = math.MinInt64 + 1
		case t.After(time.Unix(0, math.MaxInt64)):
			oldest = math.MaxInt64
		default:
			oldest = t.UnixNano()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.key(source, unit)
	e := s.units[k]
	e.msgs, e.oldest, e.dated, e.known, e.hasLag = lag.Messages, oldest, !lag.Oldest.IsZero(), lag.Known, true
	s.units[k] = e
}

func (s *unitSeries) setState(source, unit, state string) {
	if !valid(source, unit, state) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.Index(s.states, state)
	if i < 0 {
		if len(s.states) == math.MaxUint8 {
			return // not a tree state: there are seven
		}
		i = len(s.states)
		s.states = append(s.states, state)
	}
	k := s.key(source, unit)
	e := s.units[k]
	e.state = uint8(i + 1)
	s.units[k] = e
}

func (s *unitSeries) forget(source, unit string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i, ok := s.srcIdx[source]; ok {
		delete(s.units, unitKey{unit: unit, source: i})
	}
}

// Describe implements prometheus.Collector.
func (s *unitSeries) Describe(ch chan<- *prometheus.Desc) {
	ch <- s.lagMsgs
	ch <- s.lagSecs
	ch <- s.state
	ch <- s.maxMsgs
	ch <- s.maxSecs
}

// sourceMax is a source's largest lags; -1 while none is known.
type sourceMax struct{ msgs, secs float64 }

// Collect implements prometheus.Collector.
func (s *unitSeries) Collect(ch chan<- prometheus.Metric) {
	now := s.now()
	s.mu.Lock()
	ms := make([]prometheus.Metric, 0, 3*len(s.units))
	maxes := map[string]sourceMax{}
	for k, e := range s.units {
		source := s.sources[k.source]
		if e.hasLag {
			msgs, secs := float64(e.msgs), e.lag().Seconds(now)
			ms = append(ms,
				prometheus.MustNewConstMetric(s.lagMsgs, prometheus.GaugeValue, msgs, source, k.unit),
				prometheus.MustNewConstMetric(s.lagSecs, prometheus.GaugeValue, secs, source, k.unit))
			m, ok := maxes[source]
			if !ok {
				m = sourceMax{-1, -1}
			}
			maxes[source] = sourceMax{max(m.msgs, msgs), max(m.secs, secs)}
		}
		if e.state != 0 {
			ms = append(ms, prometheus.MustNewConstMetric(s.state, prometheus.GaugeValue, 1, source, k.unit, s.states[e.state-1]))
		}
	}
	s.mu.Unlock()
	for src, m := range maxes {
		ms = append(ms,
			prometheus.MustNewConstMetric(s.maxMsgs, prometheus.GaugeValue, m.msgs, src),
			prometheus.MustNewConstMetric(s.maxSecs, prometheus.GaugeValue, m.secs, src))
	}
	for _, m := range ms { // outside the lock: the registry reads ch as it gathers
		ch <- m
	}
}
