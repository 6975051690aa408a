package bench_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/cluster/bench"
	"github.com/drover-dev/drover/persistence/postgres/pgtest"
)

var pg = pgtest.New()

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

// droverBinary builds cmd/drover once per test binary.
func droverBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "drover-bench-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binary = filepath.Join(dir, "drover")
		if out, err := exec.Command("go", "build", "-o", binary, "github.com/drover-dev/drover/cmd/drover").CombinedOutput(); err != nil {
			buildErr = err
			t.Logf("%s", out)
		}
	})
	if buildErr != nil {
		t.Fatalf("build drover: %v", buildErr)
	}
	return binary
}

func TestMain(m *testing.M) {
	code := m.Run()
	if err := pg.Close(); err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		if code == 0 {
			code = 1
		}
	}
	if binary != "" {
		os.RemoveAll(filepath.Dir(binary))
	}
	os.Exit(code)
}

// runProcesses runs the bench of o with the drover binary (skipped with
// -short, which builds none) and returns its result and output.
func runProcesses(t *testing.T, o bench.Options) (bench.Result, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the drover binary")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	o.Binary = droverBinary(t)
	var out bytes.Buffer
	res, err := bench.Run(ctx, o, &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	return res, out.String()
}

// Two node processes share the topic; Run checks every row as in process.
func TestRunNodeProcesses(t *testing.T) {
	res, out := runProcesses(t, bench.Options{
		Nodes: 2, Partitions: 4, Messages: 2000, Keys: 300, Batch: 100,
		MaxWait: 20 * time.Millisecond, LatencyFor: 300 * time.Millisecond, Rate: 300, Dir: t.TempDir(),
	})
	if !strings.Contains(out, "2 node processes") || res.Rows != 300 || res.Drover <= 0 || res.Count == 0 {
		t.Errorf("rows=%d drover=%v latency count=%d; want 300 rows from 2 node processes, positive figures", res.Rows, res.Drover, res.Count)
	}
}

func TestRunIdle(t *testing.T) {
	res, out := runProcesses(t, bench.Options{Idle: 1030, IdleWindow: time.Second, Dir: t.TempDir()})
	ir := res.Idle
	lines := strings.Split(strings.TrimSpace(out), "\n")
	// 1,030 units: two memory sources (1,024 + 6)
	if ir == nil || ir.Units != 1030 || ir.RSS <= 0 || ir.BaseRSS <= 0 || ir.RSS <= ir.BaseRSS || ir.CPU < 0 || lines[len(lines)-1] != ir.Line() {
		t.Fatalf("idle result %+v, last line %q", ir, lines[len(lines)-1])
	}
}

// On a postgres:// database, twice: the second run finds the first's
// bench_* tables and rows, drops them and measures again from scratch.
func TestRunPostgresTwice(t *testing.T) {
	url := pg.URL(t)
	for run := 1; run <= 2; run++ {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		var out bytes.Buffer
		res, err := bench.Run(ctx, bench.Options{
			Store: url, Partitions: 3, Messages: 2000, Keys: 400, Batch: 100, CeilingWorkers: 3,
			MaxWait: 20 * time.Millisecond, LatencyFor: 300 * time.Millisecond, Rate: 300,
			ComparePartitions: []int{1, 2}, Dir: t.TempDir(),
		}, &out)
		cancel()
		t.Logf("run %d:\n%s", run, out.String())
		if err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		if res.Rows != 400 || res.Drover <= 0 || res.Ceiling <= 0 || res.Loop <= 0 || res.Count == 0 || len(res.Compare) != 2 {
			t.Errorf("run %d: %+v; want 400 rows and positive figures", run, res)
		}
		if !strings.Contains(out.String(), "written by 3 concurrent workers") {
			t.Errorf("run %d: the ceiling line does not name its 3 workers", run)
		}
	}
}
