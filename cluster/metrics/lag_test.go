package metrics

import (
	"testing"
	"time"

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
