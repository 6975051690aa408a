// Package metrics exports a node's runtime counters to Prometheus.
//
// New registers the drover_* collectors on a registry the caller owns (never
// the default one) and returns a *Metrics that implements actors.Metrics.
// Every series carries a constant label node=<name>. A unit has three
// series of its own (what an operator alerts on), and position_resets_total
// once a reset happens; the counters are per source:
//
//	drover_unit_lag_messages             messages behind the end of the unit, -1 unknown (gauge)
//	drover_unit_lag_seconds              age of its oldest unapplied message, 0 caught up, -1 unknown (gauge)
//	drover_unit_state{state}             1 for the unit's tree state, one series per unit
//	drover_source_lag_messages           the largest drover_unit_lag_messages of the source on this node
//	drover_source_lag_seconds            the largest drover_unit_lag_seconds of the source on this node
//	drover_unit_position_resets_total    checkpoints reset: the broker no longer had their position
//	drover_source_received_total         messages fetched
//	drover_source_applied_total          records applied (upserts and deletions)
//	drover_source_rejected_total         messages rejected by decode
//	drover_source_dead_lettered_total    messages dead-lettered
//	drover_source_acked_total            queue messages acknowledged
//	drover_source_restarts_total         unit actor restarts after a failure
//	drover_source_lease_changes_total    leases acquired, lost or released
//	drover_cluster_members               members in this node's view (gauge)
//
// With Options.PerUnit (node.metrics_per_unit) the seven counters are also
// kept per unit, as drover_unit_received_total and so on (source and unit
// labels).
//
// # Guarantees
//
//   - All methods are safe for concurrent use and never block on I/O: they
//     update in-memory collectors only. Scrapes read them concurrently.
//   - A negative count is ignored (a Prometheus counter never goes down),
//     a lag the broker cannot tell is -1 (a source's maximum is -1 only
//     when none of its units' is known), and a label value Prometheus refuses
//     (not valid UTF-8) drops the update: the calls never panic an actor.
//   - Forget removes a unit's series once the unit has left this node, so a
//     unit that moved is not reported by two nodes.
//   - drover_unit_lag_messages, drover_unit_lag_seconds, the per-source
//     maxima and drover_unit_state are made at scrape time from one small
//     entry per unit (a unit costs about 100 bytes of them, not a GaugeVec
//     child per series); lag_seconds is measured then, against
//     Options.Now (the node's clock), from the time of the oldest message
//     the unit has not applied; drover_unit_state is one series per
//     unit, its state label the state, its value 1, so that a change of
//     state replaces the series rather than adding one.
//
// # Goroutines
//
// The package starts none.
package metrics
