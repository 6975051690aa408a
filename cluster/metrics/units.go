package metrics

import (
	"sync"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
)

// unitSeries collects drover_unit_lag and drover_unit_state: one small
// entry per unit, from which a scrape makes the series. A GaugeVec child
// per series (its label pairs, hashes and metric) cost about 1 KB per unit
// on an idle node of 10,000 units; an entry here about a tenth of that
// (issue 12 item 5).
type unitSeries struct {
	lag, state *prometheus.Desc

	mu    sync.Mutex
	units map[unitKey]unitEntry
}

type unitKey struct{ source, unit string }

type unitEntry struct {
	lag    float64
	hasLag bool   // a fetch reported the lag
	state  string // the tree state drover_unit_state shows; "" none yet
}

func newUnitSeries(constLabels prometheus.Labels) *unitSeries {
	return &unitSeries{
		lag: prometheus.NewDesc("drover_unit_lag",
			"Messages between the unit's last fetched position and the end of the partition, as of the last fetch.",
			[]string{LabelSource, LabelUnit}, constLabels),
		state: prometheus.NewDesc("drover_unit_state",
			"1 for the state the unit's tree entry shows (starting, acquiring, running, retrying, stopping, stopped); one series per unit.",
			[]string{LabelSource, LabelUnit, LabelState}, constLabels),
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

func (s *unitSeries) setLag(source, unit string, lag float64) {
	if !valid(source, unit) {
		return
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
	ch <- s.lag
	ch <- s.state
}

// Collect implements prometheus.Collector.
func (s *unitSeries) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	ms := make([]prometheus.Metric, 0, 2*len(s.units))
	for k, e := range s.units {
		if e.hasLag {
			ms = append(ms, prometheus.MustNewConstMetric(s.lag, prometheus.GaugeValue, e.lag, k.source, k.unit))
		}
		if e.state != "" {
			ms = append(ms, prometheus.MustNewConstMetric(s.state, prometheus.GaugeValue, 1, k.source, k.unit, e.state))
		}
	}
	s.mu.Unlock()
	for _, m := range ms { // outside the lock: the registry reads ch as it gathers
		ch <- m
	}
}
