package metrics

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/drover-dev/drover/actors"
)

// The helpers below stand in for prometheus/testutil, whose diff dependency
// (github.com/kylelemons/godebug) is not in go.mod.

func gather(t *testing.T, reg *prometheus.Registry) []*dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	return mfs
}

// compare renders the named families of reg (all when none are named) in
// the text format and compares them with want.
func compare(t *testing.T, reg *prometheus.Registry, want string, names ...string) {
	t.Helper()
	var b strings.Builder
	for _, mf := range gather(t, reg) {
		if len(names) > 0 && !slices.Contains(names, mf.GetName()) {
			continue
		}
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			t.Fatalf("render %s: %v", mf.GetName(), err)
		}
	}
	want = strings.TrimLeft(want, "\n")
	if b.String() != want {
		t.Fatalf("exposition:\n%s\nwant:\n%s", b.String(), want)
	}
}

// value is the value of family name's series with the given source and
// unit labels; ok is false when there is none.
func value(t *testing.T, reg *prometheus.Registry, name, source, unit string) (v float64, ok bool) {
	t.Helper()
	for _, mf := range gather(t, reg) {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label(m, "source") != source || label(m, "unit") != unit {
				continue
			}
			if m.Counter != nil {
				return m.Counter.GetValue(), true
			}
			return m.Gauge.GetValue(), true
		}
	}
	return 0, false
}

func mustValue(t *testing.T, reg *prometheus.Registry, name, source, unit string, want float64) {
	t.Helper()
	got, ok := value(t, reg, name, source, unit)
	if !ok {
		t.Fatalf("%s{source=%q,unit=%q}: no such series", name, source, unit)
	}
	if got != want {
		t.Fatalf("%s{source=%q,unit=%q} = %v, want %v", name, source, unit, got, want)
	}
}

// series counts the series of each family.
func series(t *testing.T, reg *prometheus.Registry) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, mf := range gather(t, reg) {
		out[mf.GetName()] = len(mf.GetMetric())
	}
	return out
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// received reports a fetch of n messages that left the unit lag
// messages behind, as the runtime does (Received, then Lag).
func received(m *Metrics, source, unit string, n, lag int64) {
	m.Received(source, unit, n)
	m.Lag(source, unit, actors.Lag{Messages: lag})
}

// perUnit turns on the per-unit counters, which the tests below read.
var perUnit = Options{PerUnit: true}

var unitFamilies = []string{
	"drover_unit_received_total", "drover_unit_applied_total", "drover_unit_rejected_total",
	"drover_unit_dead_lettered_total", "drover_unit_acked_total", "drover_unit_lag_messages",
	"drover_unit_restarts_total", "drover_unit_lease_changes_total",
}

func TestMetricsExposeEveryCounterWithNodeSourceAndUnit(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, "node-1", perUnit)
	received(m, "orders", "orders/0", 10, 5)
	received(m, "orders", "orders/0", 3, 2) // lag is the latest value, not a sum
	m.Applied("orders", "orders/0", 11, 1, 1)
	m.Acked("jobs", "jobs/slot-0", 4)
	m.Restarted("orders", "orders/0")
	m.Restarted("orders", "orders/0")
	m.LeaseChanged("orders", "orders/0")
	m.SetMembers(3)

	compare(t, reg, `
# HELP drover_cluster_members Members (alive or leaving, this node included) in this node's membership view.
# TYPE drover_cluster_members gauge
drover_cluster_members{node="node-1"} 3
# HELP drover_unit_acked_total Queue messages the unit acknowledged after the store committed.
# TYPE drover_unit_acked_total counter
drover_unit_acked_total{node="node-1",source="jobs",unit="jobs/slot-0"} 4
# HELP drover_unit_applied_total Records (upserts and deletions) the unit applied to the store.
# TYPE drover_unit_applied_total counter
drover_unit_applied_total{node="node-1",source="orders",unit="orders/0"} 11
# HELP drover_unit_dead_lettered_total Messages the unit dead-lettered.
# TYPE drover_unit_dead_lettered_total counter
drover_unit_dead_lettered_total{node="node-1",source="orders",unit="orders/0"} 1
# HELP drover_unit_lag_messages Messages the broker holds beyond the unit's last fetch, as of that fetch; -1 when the broker cannot count them.
# TYPE drover_unit_lag_messages gauge
drover_unit_lag_messages{node="node-1",source="orders",unit="orders/0"} 2
# HELP drover_unit_lease_changes_total Changes of the unit's lease on this node (acquired, lost, released).
# TYPE drover_unit_lease_changes_total counter
drover_unit_lease_changes_total{node="node-1",source="orders",unit="orders/0"} 1
# HELP drover_unit_received_total Messages fetched from the broker by the unit.
# TYPE drover_unit_received_total counter
drover_unit_received_total{node="node-1",source="orders",unit="orders/0"} 13
# HELP drover_unit_rejected_total Messages the unit's decoder rejected.
# TYPE drover_unit_rejected_total counter
drover_unit_rejected_total{node="node-1",source="orders",unit="orders/0"} 1
# HELP drover_unit_restarts_total Restarts of the unit actor after it failed.
# TYPE drover_unit_restarts_total counter
drover_unit_restarts_total{node="node-1",source="orders",unit="orders/0"} 2
`, append(unitFamilies, "drover_cluster_members")...)
	problems, err := promlint.NewWithMetricFamilies(gather(t, reg)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint %s: %s", p.Metric, p.Text)
	}
}

func TestMetricsIgnoreNegativeCountsAndBadLabels(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, "n", perUnit)
	received(m, "s", "s/0", -5, -1)
	m.Applied("s", "s/0", -1, -2, -3)
	m.Acked("s", "s/0", -4)
	received(m, "s", "s/\xff", 1, 1)                              // not UTF-8: dropped, no panic
	mustValue(t, reg, "drover_unit_lag_messages", "s", "s/0", -1) // unknown, not 0 (caught up)
	n := series(t, reg)
	for _, f := range []string{"drover_unit_received_total", "drover_unit_applied_total", "drover_unit_rejected_total",
		"drover_unit_dead_lettered_total", "drover_unit_acked_total"} {
		if n[f] != 0 {
			t.Errorf("%s has %d series after negative counts, want 0", f, n[f])
		}
	}
	if n["drover_unit_lag_messages"] != 1 {
		t.Errorf("drover_unit_lag_messages has %d series, want 1 (the invalid label must be dropped)", n["drover_unit_lag_messages"])
	}
}

func TestMetricsForgetRemovesOnlyThatUnit(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, "n", perUnit)
	for _, u := range []string{"s/0", "s/1"} {
		received(m, "s", u, 1, 1)
		m.Applied("s", u, 1, 1, 1)
		m.Acked("s", u, 1)
		m.Restarted("s", u)
		m.LeaseChanged("s", u)
	}
	m.SetMembers(2)
	m.Forget("s", "s/0")
	n := series(t, reg)
	for _, f := range unitFamilies {
		if n[f] != 1 {
			t.Errorf("%s has %d series after Forget, want 1", f, n[f])
		}
		if _, ok := value(t, reg, f, "s", "s/0"); ok {
			t.Errorf("%s still has s/0 after Forget", f)
		}
	}
	mustValue(t, reg, "drover_unit_received_total", "s", "s/1", 1)
	compare(t, reg, `
# HELP drover_cluster_members Members (alive or leaving, this node included) in this node's membership view.
# TYPE drover_cluster_members gauge
drover_cluster_members{node="n"} 2
`, "drover_cluster_members")
}

func TestMetricsAreSafeForConcurrentUse(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, "n", perUnit)
	const workers, per = 8, 500
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				received(m, "s", "s/0", 2, int64(i))
				m.Applied("s", "s/0", 1, 0, 1)
				m.Restarted("s", "s/0")
				m.SetMembers(i)
			}
		}()
	}
	// Scrape while writing: the race detector checks the reads too.
	for i := 0; i < 20; i++ {
		gather(t, reg)
	}
	wg.Wait()
	mustValue(t, reg, "drover_unit_received_total", "s", "s/0", 2*workers*per)
	mustValue(t, reg, "drover_unit_applied_total", "s", "s/0", workers*per)
	mustValue(t, reg, "drover_unit_dead_lettered_total", "s", "s/0", workers*per)
	mustValue(t, reg, "drover_unit_restarts_total", "s", "s/0", workers*per)
}

func TestTwoNodesShareARegistryButOneNodeCannotRegisterTwice(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, b := New(reg, "a", perUnit), New(reg, "b", perUnit)
	a.Restarted("s", "s/0")
	b.Restarted("s", "s/0")
	b.Restarted("s", "s/0")
	compare(t, reg, `
# HELP drover_unit_restarts_total Restarts of the unit actor after it failed.
# TYPE drover_unit_restarts_total counter
drover_unit_restarts_total{node="a",source="s",unit="s/0"} 1
drover_unit_restarts_total{node="b",source="s",unit="s/0"} 2
`, "drover_unit_restarts_total")
	defer func() {
		if recover() == nil {
			t.Fatal("registering node a twice did not panic")
		}
	}()
	New(reg, "a", perUnit)
}

func TestNewWithoutRegistryWorks(t *testing.T) {
	m := New(nil, "n", perUnit)
	m.Acked("s", "s/0", 2)
	// The collectors work without a scraper; look at one through a registry
	// of the test's own.
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.unit.acked)
	mustValue(t, reg, "drover_unit_acked_total", "s", "s/0", 2)
}

// By default a unit has three series, its two lags (messages, seconds)
// and its state, and the counters are per source: 1,000 units cost 3,000
// series, not 10,000.
func TestDefaultSeriesArePerSourceButLagAndState(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, "n", Options{})
	const units = 1000
	for i := range units {
		u := fmt.Sprintf("s/%d", i)
		m.UnitState("s", u, "starting")
		m.UnitState("s", u, "running")
		received(m, "s", u, 2, 1)
		m.Applied("s", u, 2, 0, 1)
		m.Acked("s", u, 2)
		m.Restarted("s", u)
		m.LeaseChanged("s", u)
	}
	n := series(t, reg)
	total := 0
	for f, k := range n {
		total += k
		if strings.HasSuffix(f, "_total") && strings.HasPrefix(f, "drover_unit_") {
			t.Errorf("%s has %d series with per-unit counters off", f, k)
		}
	}
	if n["drover_unit_lag_messages"] != units || n["drover_unit_lag_seconds"] != units || n["drover_unit_state"] != units {
		t.Errorf("lag %d, lag_seconds %d, state %d series; want %d each (one per unit)",
			n["drover_unit_lag_messages"], n["drover_unit_lag_seconds"], n["drover_unit_state"], units)
	}
	if n["drover_source_lag_messages"] != 1 || n["drover_source_lag_seconds"] != 1 {
		t.Errorf("source lag %d, lag_seconds %d series; want 1 each (one per source)", n["drover_source_lag_messages"], n["drover_source_lag_seconds"])
	}
	if max := 3*units + 10; total > max {
		t.Errorf("%d series for %d units, want at most %d", total, units, max)
	}
	compare(t, reg, `
# HELP drover_source_received_total Messages fetched from the broker by the source's units on this node.
# TYPE drover_source_received_total counter
drover_source_received_total{node="n",source="s"} 2000
`, "drover_source_received_total")
	mustValue(t, reg, "drover_source_dead_lettered_total", "s", "", units)
	mustValue(t, reg, "drover_source_restarts_total", "s", "", units)
}

// A unit has one drover_unit_state series, for the state it is in now;
// Forget removes it, and the per-source counters stay.
func TestUnitStateIsOneSeriesPerUnit(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, "n", Options{})
	m.UnitState("s", "s/0", "acquiring")
	m.UnitState("s", "s/0", "running")
	m.UnitState("s", "s/0", "running")
	m.UnitState("s", "s/1", "retrying")
	received(m, "s", "s/0", 3, 0)
	compare(t, reg, `
# HELP drover_unit_state 1 for the state the unit's tree entry shows (starting, acquiring, running, retrying, stopping, stopped); one series per unit.
# TYPE drover_unit_state gauge
drover_unit_state{node="n",source="s",state="retrying",unit="s/1"} 1
drover_unit_state{node="n",source="s",state="running",unit="s/0"} 1
`, "drover_unit_state")
	m.Forget("s", "s/0")
	compare(t, reg, `
# HELP drover_unit_state 1 for the state the unit's tree entry shows (starting, acquiring, running, retrying, stopping, stopped); one series per unit.
# TYPE drover_unit_state gauge
drover_unit_state{node="n",source="s",state="retrying",unit="s/1"} 1
`, "drover_unit_state")
	if _, ok := value(t, reg, "drover_unit_lag_messages", "s", "s/0"); ok {
		t.Error("s/0's lag stays after Forget")
	}
	mustValue(t, reg, "drover_source_received_total", "s", "", 3)
	m.UnitState("s", "s/\xff", "running") // not UTF-8: dropped, no panic
	if n := series(t, reg)["drover_unit_state"]; n != 1 {
		t.Errorf("%d state series, want 1", n)
	}
}
