package metrics

import (
	"testing"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/drover-dev/drover/actors"
)

// lag_seconds is measured at the scrape against the clock given (a stuck
// unit's grows), -1 when unknown, 0 when caught up; each source has the
// largest of its units' lags, known ones first.
func TestLagSecondsAtScrapeAndPerSourceMax(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	reg := prometheus.NewRegistry()
	m := New(reg, "n", Options{Now: func() time.Time { return now }})
	m.Lag("s", "s/0", actors.Lag{Messages: 40, Oldest: now.Add(-3 * time.Second), Known: true})
	m.Lag("s", "s/1", actors.Lag{Messages: 0, Known: true})                                                   // caught up
	m.Lag("s", "s/2", actors.Lag{Messages: -7})                                                               // unknown
	m.Lag("q", "q/slot-0", actors.Lag{Messages: -1})                                                          // a broker that cannot tell
	m.Lag("k", "k/shard-0", actors.Lag{Messages: -1, Oldest: now.Add(-1500 * time.Millisecond), Known: true}) // dated, not counted
	mustValue(t, reg, "drover_unit_lag_seconds", "s", "s/0", 3)
	mustValue(t, reg, "drover_unit_lag_seconds", "s", "s/1", 0)
	mustValue(t, reg, "drover_unit_lag_seconds", "s", "s/2", -1)
	mustValue(t, reg, "drover_unit_lag_messages", "s", "s/2", -1)
	mustValue(t, reg, "drover_source_lag_messages", "s", "", 40)
	mustValue(t, reg, "drover_source_lag_seconds", "s", "", 3)
	mustValue(t, reg, "drover_source_lag_seconds", "q", "", -1)
	mustValue(t, reg, "drover_source_lag_messages", "k", "", -1)
	mustValue(t, reg, "drover_source_lag_seconds", "k", "", 1.5)

	now = now.Add(10 * time.Second) // no fetch since: the oldest message is older
	mustValue(t, reg, "drover_unit_lag_seconds", "s", "s/0", 13)
	mustValue(t, reg, "drover_source_lag_seconds", "s", "", 13)
	mustValue(t, reg, "drover_unit_lag_seconds", "s", "s/1", 0)

	m.Forget("s", "s/0")
	mustValue(t, reg, "drover_source_lag_seconds", "s", "", 0)
	mustValue(t, reg, "drover_source_lag_messages", "s", "", 0)
	m.Forget("s", "s/1")
	m.Forget("s", "s/2")
	if _, ok := value(t, reg, "drover_source_lag_seconds", "s", ""); ok {
		t.Error("a source with no unit left keeps its lag series")
	}
}

// A unit's entry is small (issue 12 item 5: 10,000 idle units), and the
// lag's time survives the compact form: a message stamped at the Unix
// epoch is dated, not caught up, and stamps beyond what Unix nanoseconds
// hold give the bound's lag.
func TestUnitEntryIsSmallAndKeepsTheLag(t *testing.T) {
	if n := unsafe.Sizeof(unitKey{}) + unsafe.Sizeof(unitEntry{}); n > 48 {
		t.Errorf("a unit's map slot takes %d bytes, want at most 48", n)
	}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	reg := prometheus.NewRegistry()
	m := New(reg, "n", Options{Now: func() time.Time { return now }})
	m.Lag("s", "s/0", actors.Lag{Messages: 1, Oldest: time.Unix(0, 0), Known: true})
	m.Lag("s", "s/1", actors.Lag{Messages: 1, Oldest: time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), Known: true})
	m.Lag("s", "s/2", actors.Lag{Messages: 1, Oldest: time.Date(1, 1, 2, 0, 0, 0, 0, time.UTC), Known: true})
	mustValue(t, reg, "drover_unit_lag_seconds", "s", "s/0", float64(now.Unix()))
	mustValue(t, reg, "drover_unit_lag_seconds", "s", "s/1", 0) // ahead of the node's clock
	if v, ok := value(t, reg, "drover_unit_lag_seconds", "s", "s/2"); !ok || v < float64(now.Unix()) {
		t.Errorf("lag_seconds of a unit stamped in year 1: %v (want at least the epoch's)", v)
	}
	m.UnitState("s", "s/0", "running")
	m.UnitState("t", "s/0", "stopped") // another source's unit of the same id
	mustValue(t, reg, "drover_unit_state", "s", "s/0", 1)
}
