package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/drover-dev/drover/actors"
)

// Label names of the series.
const (
	LabelNode   = "node"
	LabelSource = "source"
	LabelUnit   = "unit"
	LabelState  = "state"
)

// Options choose which series a node exports.
type Options struct {
	// PerUnit adds the per-unit counters (drover_unit_received_total and
	// the others) beside the per-source ones: seven more series per unit,
	// which a node of thousands of units should not pay for unless an
	// operator reads them (node.metrics_per_unit).
	PerUnit bool
	// Now is the node's clock, against which a scrape measures the units'
	// lag_seconds; nil means time.Now.
	Now func() time.Time
}

// counters is one set of the runtime's counters, per source or per unit.
type counters struct {
	received, applied, rejected, deadLettered, acked, restarts, leaseChanges *prometheus.CounterVec
}

func newCounters(subsystem string, constLabels prometheus.Labels, labels []string) counters {
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "drover", Subsystem: subsystem, Name: name, Help: help, ConstLabels: constLabels,
		}, labels)
	}
	if subsystem == "unit" {
		return counters{
			received:     counter("received_total", "Messages fetched from the broker by the unit."),
			applied:      counter("applied_total", "Records (upserts and deletions) the unit applied to the store."),
			rejected:     counter("rejected_total", "Messages the unit's decoder rejected."),
			deadLettered: counter("dead_lettered_total", "Messages the unit dead-lettered."),
			acked:        counter("acked_total", "Queue messages the unit acknowledged after the store committed."),
			restarts:     counter("restarts_total", "Restarts of the unit actor after it failed."),
			leaseChanges: counter("lease_changes_total", "Changes of the unit's lease on this node (acquired, lost, released)."),
		}
	}
	return counters{
		received:     counter("received_total", "Messages fetched from the broker by the source's units on this node."),
		applied:      counter("applied_total", "Records (upserts and deletions) the source's units on this node applied to the store."),
		rejected:     counter("rejected_total", "Messages the decoder of the source's units on this node rejected."),
		deadLettered: counter("dead_lettered_total", "Messages the source's units on this node dead-lettered."),
		acked:        counter("acked_total", "Queue messages the source's units on this node acknowledged after the store committed."),
		restarts:     counter("restarts_total", "Restarts of the source's unit actors on this node after they failed."),
		leaseChanges: counter("lease_changes_total", "Changes of the source's leases on this node (acquired, lost, released)."),
	}
}

func (c counters) all() []*prometheus.CounterVec {
	return []*prometheus.CounterVec{c.received, c.applied, c.rejected, c.deadLettered, c.acked, c.restarts, c.leaseChanges}
}

// Metrics holds a node's collectors. It implements actors.Metrics.
type Metrics struct {
	source  counters    // always: by source
	unit    *counters   // Options.PerUnit: by source and unit
	units   *unitSeries // the lags and drover_unit_state
	resets  *prometheus.CounterVec
	members prometheus.Gauge
}

var _ actors.Metrics = (*Metrics)(nil)

// New creates the collectors with the constant label node=<node> and
// registers them on reg. A nil reg means a private registry nobody scrapes
// (useful in tests and when metrics are off).
//
// New panics when reg already holds drover collectors for this node (the
// programmer registered twice), like prometheus.Registry.MustRegister.
func New(reg *prometheus.Registry, node string, o Options) *Metrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	constLabels := prometheus.Labels{LabelNode: node}
	unitLabels := []string{LabelSource, LabelUnit}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	m := &Metrics{
		source: newCounters("source", constLabels, []string{LabelSource}),
		units:  newUnitSeries(constLabels, now),
		resets: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "drover", Subsystem: "unit", Name: "position_resets_total", ConstLabels: constLabels,
			Help: "Checkpoints reset on this node because the broker no longer had their position " +
				"(deleted by retention, or unknown: a recreated topic); kept when the unit moves.",
		}, unitLabels),
		members: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "drover", Subsystem: "cluster", Name: "members", ConstLabels: constLabels,
			Help: "Members (alive or leaving, this node included) in this node's membership view.",
		}),
	}
	cs := []prometheus.Collector{m.units, m.resets, m.members}
	for _, v := range m.source.all() {
		cs = append(cs, v)
	}
	if o.PerUnit {
		u := newCounters("unit", constLabels, unitLabels)
		m.unit = &u
		for _, v := range u.all() {
			cs = append(cs, v)
		}
	}
	reg.MustRegister(cs...)
	return m
}

// add adds n to a counter of the given labels; n <= 0 is ignored, and so
// are label values Prometheus refuses (not UTF-8): a metric must never
// panic an actor.
func add(v *prometheus.CounterVec, n int64, labels ...string) {
	if n <= 0 {
		return
	}
	if c, err := v.GetMetricWithLabelValues(labels...); err == nil {
		c.Add(float64(n))
	}
}

// count adds n to the source's counter pick chooses, and to the unit's
// when per-unit counters are on.
func (m *Metrics) count(pick func(counters) *prometheus.CounterVec, source, unit string, n int64) {
	add(pick(m.source), n, source)
	if m.unit != nil {
		add(pick(*m.unit), n, source, unit)
	}
}

// Received counts n fetched messages.
func (m *Metrics) Received(source, unit string, n int64) {
	m.count(func(c counters) *prometheus.CounterVec { return c.received }, source, unit, n)
}

// Lag records the unit's lag: drover_unit_lag_messages (-1 unknown) and
// what drover_unit_lag_seconds is measured from at each scrape.
func (m *Metrics) Lag(source, unit string, lag actors.Lag) { m.units.setLag(source, unit, lag) }

// Applied counts the outcome of one applied batch.
func (m *Metrics) Applied(source, unit string, applied, rejected, deadLettered int64) {
	m.count(func(c counters) *prometheus.CounterVec { return c.applied }, source, unit, applied)
	m.count(func(c counters) *prometheus.CounterVec { return c.rejected }, source, unit, rejected)
	m.count(func(c counters) *prometheus.CounterVec { return c.deadLettered }, source, unit, deadLettered)
}

// Acked counts n acknowledged queue messages.
func (m *Metrics) Acked(source, unit string, n int64) {
	m.count(func(c counters) *prometheus.CounterVec { return c.acked }, source, unit, n)
}

// Restarted counts one restart of the unit actor.
func (m *Metrics) Restarted(source, unit string) {
	m.count(func(c counters) *prometheus.CounterVec { return c.restarts }, source, unit, 1)
}

// LeaseChanged counts one change of the unit's lease.
func (m *Metrics) LeaseChanged(source, unit string) {
	m.count(func(c counters) *prometheus.CounterVec { return c.leaseChanges }, source, unit, 1)
}

// PositionReset counts one checkpoint reset (on_position_reset). Its series
// is per unit whatever the options and is not forgotten when the unit
// moves: a reset is rare and worth an alert.
func (m *Metrics) PositionReset(source, unit string) { add(m.resets, 1, source, unit) }

// UnitState makes state the one drover_unit_state series of the unit.
func (m *Metrics) UnitState(source, unit, state string) { m.units.setState(source, unit, state) }

// SetMembers records the size of this node's membership view.
func (m *Metrics) SetMembers(n int) { m.members.Set(float64(n)) }

// Forget deletes every per-unit series of a unit (but its position
// resets), for when the unit has stopped on this node (it moved, or its
// source was removed). Its counters start from zero if it comes back,
// which Prometheus' rate() reads as a reset; the per-source counters go
// on.
func (m *Metrics) Forget(source, unit string) {
	m.units.forget(source, unit)
	if m.unit != nil {
		for _, v := range m.unit.all() {
			v.DeleteLabelValues(source, unit)
		}
	}
}
