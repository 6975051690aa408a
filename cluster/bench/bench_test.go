package bench_test

import (
	"bytes"
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/drover-dev/drover/cluster/bench"
)

// TestRunSQLite runs every figure at a tiny size on SQLite and checks the
// lines, the figures, and that drover left exactly one row per key (Run
// itself checks each row against the last message of its key).
func TestRunSQLite(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	res, err := bench.Run(ctx, bench.Options{
		Partitions: 2, Messages: 2000, Keys: 500, Batch: 100, MaxWait: 20 * time.Millisecond,
		LatencyFor: 500 * time.Millisecond, Rate: 400, ComparePartitions: []int{1, 3}, Dir: dir,
	}, &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	for _, prefix := range []string{"drover: ", "ceiling: ", "loop: ", "latency: ", "compare: "} {
		found := false
		for _, l := range lines {
			found = found || strings.HasPrefix(l, prefix)
		}
		if !found {
			t.Errorf("no line starting %q", prefix)
		}
	}
	if last := lines[len(lines)-1]; last != res.Line() || !strings.HasPrefix(last, "bench: partitions=2 messages=2000 drover=") {
		t.Errorf("last line %q, want Result.Line %q", last, res.Line())
	}
	for name, v := range map[string]float64{"drover": res.Drover, "ceiling": res.Ceiling, "loop": res.Loop, "vs_ceiling": res.VsCeiling()} {
		if v <= 0 {
			t.Errorf("%s = %v, want > 0", name, v)
		}
	}
	if len(res.Compare) != 2 || res.Compare[0] <= 0 || res.Compare[1] <= 0 {
		t.Errorf("compare = %v, want two positive figures", res.Compare)
	}
	// 400 msg/s for at least 0.5 s; more when the producer's ticks run late
	if res.P50 <= 0 || res.P99 < res.P50 || res.Max < res.P99 || res.Count < 200 || res.Count > 600 {
		t.Errorf("latency p50=%s p99=%s max=%s over %d messages; want 0 < p50 <= p99 <= max over 200 to 600", res.P50, res.P99, res.Max, res.Count)
	}
	if res.Rows != 500 {
		t.Errorf("rows = %d, want 500 (one per key)", res.Rows)
	}
	// count the rows again, with plain SQL: the drover table got the 2,000
	// preloaded messages and the 200 of the latency figure, which touch
	// the same 500 keys
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "bench.db")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for table, want := range map[string]int{"bench_drover": 500, "bench_ceiling": 500, "bench_loop": 500, "bench_p1": 500, "bench_p3": 500} {
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM "` + table + `"`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != want {
			t.Errorf("%s: %d rows, want %d", table, n, want)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []struct {
		o    bench.Options
		flag string
	}{
		{bench.Options{Partitions: -1}, "--partitions"},
		{bench.Options{Messages: -5}, "--messages"},
		{bench.Options{Keys: -1}, "--keys"},
		{bench.Options{Batch: 20_000}, "--batch"},
		{bench.Options{Payload: 10}, "--payload"},
		{bench.Options{Rate: -1}, "--rate"},
		{bench.Options{MaxWait: time.Hour}, "--max-wait"},
		{bench.Options{ComparePartitions: []int{64}}, "--compare-partitions"},
		{bench.Options{ComparePartitions: []int{64, 0}}, "--compare-partitions"},
		{bench.Options{Store: "mysql://x"}, "--store"},
		{bench.Options{Store: "postgres://"}, "--store"},
		{bench.Options{Idle: 10, Store: "postgres"}, "--idle"},
		{bench.Options{Nodes: 2}, "--nodes"},
		{bench.Options{IdleWindow: time.Millisecond}, "--idle-window"},
	} {
		err := c.o.Validate()
		if err == nil || !strings.Contains(err.Error(), c.flag) {
			t.Errorf("%+v: error %v, want one naming %s", c.o, err, c.flag)
		}
	}
	if err := (bench.Options{}).Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	// the scheme in any case, as the store opener reads it
	for _, url := range []string{"postgres://u@h/d", "POSTGRES://u@h/d", "PostgreSQL://u@h/d"} {
		if err := (bench.Options{Store: url}).Validate(); err != nil {
			t.Errorf("--store %s: %v", url, err)
		}
	}
}
