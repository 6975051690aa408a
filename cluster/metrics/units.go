package metrics

import (
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
// an idle node of 10,000 units; an entry here about a tenth of that
// (issue 12 item 5). lag_seconds is measured at the scrape, against the
// node's clock, so a stuck unit's grows between its fetches.
type unitSeries struct {
	lagMsgs, lagSecs, state *prometheus.Desc
	maxMsgs, maxSecs        *prometheus.Desc
	now                     func() time.Time

	mu    sync.Mutex
	units map[unitKey]unitEntry
}

type unitKey struct{ source, unit string }

type unitEntry struct {
	lag    actors.Lag
	hasLag bool   // a fetch reported the lag
	state  string // the tree state drover_unit_state shows; "" none yet
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
		now:   now,
		units: map[unitKey]unitEntry{},
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
	s.mu.Lock()
	defer s.mu.Unlock()
	k := unitKey{source, unit}
	e := s.units[k]
	e.lag, e.hasLag = lag, true
	s.units[k] = e
}

func (s *unitSeries) setState(source, unit, state string) {
	if !valid(source, unit, state) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := unitKey{source, unit}
	e := s.units[k]
	e.state = state
	s.units[k] = e
}

func (s *unitSeries) forget(source, unit string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.units, unitKey{source, unit})
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
		if e.hasLag {
			msgs, secs := float64(e.lag.Messages), e.lag.Seconds(now)
			ms = append(ms,
				prometheus.MustNewConstMetric(s.lagMsgs, prometheus.GaugeValue, msgs, k.source, k.unit),
				prometheus.MustNewConstMetric(s.lagSecs, prometheus.GaugeValue, secs, k.source, k.unit))
			m, ok := maxes[k.source]
			if !ok {
				m = sourceMax{-1, -1}
			}
			maxes[k.source] = sourceMax{max(m.msgs, msgs), max(m.secs, secs)}
		}
		if e.state != "" {
			ms = append(ms, prometheus.MustNewConstMetric(s.state, prometheus.GaugeValue, 1, k.source, k.unit, e.state))
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
