package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/drover-dev/drover/actors"
)

// Label names of the per-unit series.
const (
	LabelNode   = "node"
	LabelSource = "source"
	LabelUnit   = "unit"
)

// Metrics holds a node's collectors. It implements actors.Metrics.
type Metrics struct {
	received     *prometheus.CounterVec
	applied      *prometheus.CounterVec
	rejected     *prometheus.CounterVec
	deadLettered *prometheus.CounterVec
	acked        *prometheus.CounterVec
	lag          *prometheus.GaugeVec
	restarts     *prometheus.CounterVec
	leaseChanges *prometheus.CounterVec
	resets       *prometheus.CounterVec
	members      prometheus.Gauge

	unitVecs []*prometheus.MetricVec
}

var _ actors.Metrics = (*Metrics)(nil)

// New creates the collectors with the constant label node=<node> and
// registers them on reg. A nil reg means a private registry nobody scrapes
// (useful in tests and when metrics are off).
//
// New panics when reg already holds drover collectors for this node (the
// programmer registered twice), like prometheus.Registry.MustRegister.
func New(reg *prometheus.Registry, node string) *Metrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	constLabels := prometheus.Labels{LabelNode: node}
	unitLabels := []string{LabelSource, LabelUnit}
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "drover", Subsystem: "unit", Name: name, Help: help, ConstLabels: constLabels,
		}, unitLabels)
	}
	m := &Metrics{
		received:     counter("received_total", "Messages fetched from the broker by the unit."),
		applied:      counter("applied_total", "Records (upserts and deletions) the unit applied to the store."),
		rejected:     counter("rejected_total", "Messages the unit's decoder rejected."),
		deadLettered: counter("dead_lettered_total", "Messages the unit dead-lettered."),
		acked:        counter("acked_total", "Queue messages the unit acknowledged after the store committed."),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "drover", Subsystem: "unit", Name: "lag", ConstLabels: constLabels,
			Help: "Messages between the unit's last fetched position and the end of the partition, as of the last fetch.",
		}, unitLabels),
		restarts:     counter("restarts_total", "Restarts of the unit actor after it failed."),
		leaseChanges: counter("lease_changes_total", "Changes of the unit's lease on this node (acquired, lost, released)."),
		resets: counter("position_resets_total", "Checkpoints reset on this node because the broker no longer had their position "+
			"(deleted by retention, or unknown: a recreated topic); kept when the unit moves."),
		members: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "drover", Subsystem: "cluster", Name: "members", ConstLabels: constLabels,
			Help: "Members (alive or leaving, this node included) in this node's membership view.",
		}),
	}
	m.unitVecs = []*prometheus.MetricVec{
		m.received.MetricVec, m.applied.MetricVec, m.rejected.MetricVec, m.deadLettered.MetricVec,
		m.acked.MetricVec, m.lag.MetricVec, m.restarts.MetricVec, m.leaseChanges.MetricVec,
	}
	reg.MustRegister(m.received, m.applied, m.rejected, m.deadLettered, m.acked, m.lag, m.restarts, m.leaseChanges, m.resets, m.members)
	return m
}

// add adds n to a unit's counter; n <= 0 is ignored, and so are label
// values Prometheus refuses (not UTF-8): a metric must never panic an actor.
func add(v *prometheus.CounterVec, source, unit string, n int64) {
	if n <= 0 {
		return
	}
	if c, err := v.GetMetricWithLabelValues(source, unit); err == nil {
		c.Add(float64(n))
	}
}

// Received counts n fetched messages and records the unit's lag.
func (m *Metrics) Received(source, unit string, n, lag int64) {
	add(m.received, source, unit, n)
	if lag < 0 {
		lag = 0
	}
	if g, err := m.lag.GetMetricWithLabelValues(source, unit); err == nil {
		g.Set(float64(lag))
	}
}

// Applied counts the outcome of one applied batch.
func (m *Metrics) Applied(source, unit string, applied, rejected, deadLettered int64) {
	add(m.applied, source, unit, applied)
	add(m.rejected, source, unit, rejected)
	add(m.deadLettered, source, unit, deadLettered)
}

// Acked counts n acknowledged queue messages.
func (m *Metrics) Acked(source, unit string, n int64) { add(m.acked, source, unit, n) }

// Restarted counts one restart of the unit actor.
func (m *Metrics) Restarted(source, unit string) { add(m.restarts, source, unit, 1) }

// LeaseChanged counts one change of the unit's lease.
func (m *Metrics) LeaseChanged(source, unit string) { add(m.leaseChanges, source, unit, 1) }

// PositionReset counts one checkpoint reset (on_position_reset). Its series
// is not forgotten when the unit moves: a reset is rare and worth an alert.
func (m *Metrics) PositionReset(source, unit string) { add(m.resets, source, unit, 1) }

// SetMembers records the size of this node's membership view.
func (m *Metrics) SetMembers(n int) { m.members.Set(float64(n)) }

// Forget deletes every series of a unit, for when the unit has stopped on
// this node (it moved, or its source was removed). Its counters start from
// zero if it comes back, which Prometheus' rate() reads as a reset.
func (m *Metrics) Forget(source, unit string) {
	for _, v := range m.unitVecs {
		v.DeleteLabelValues(source, unit)
	}
}
