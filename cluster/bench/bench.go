package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/drover-dev/drover/internal/pglocal"
	"github.com/drover-dev/drover/internal/redact"
	"github.com/drover-dev/drover/persistence/stores"
)

// Options say what to measure. Zero fields mean the defaults: the figures
// of issue 12 (12 partitions, 300,000 messages of 200 bytes over 100,000
// keys, batch 500, max_wait 200 ms) on SQLite in a temporary directory.
type Options struct {
	// Store is "" (SQLite in Dir), "postgres" (a throwaway server from the
	// local binaries, see internal/pglocal) or a postgres:// URL (bench
	// drops and rewrites its own bench_* tables and rows there).
	Store string
	// Nodes is how many node processes of Binary consume the topic; 0 runs
	// one node in this process.
	Nodes  int
	Binary string
	// Partitions, Messages, Keys, Batch (batch_size), Payload (bytes per
	// message) and MaxWait (max_wait) describe the workload.
	Partitions, Messages, Keys, Batch, Payload int
	MaxWait                                    time.Duration
	// Rate is the publish rate of the latency figure in messages per
	// second; 0: half the drover figure. LatencyFor is how long it
	// publishes (default 10 s); SkipLatency leaves the figure out.
	Rate        int
	LatencyFor  time.Duration
	SkipLatency bool
	// CeilingWorkers is how many concurrent writers the PostgreSQL ceiling
	// and loop use (default 12); SQLite always has one connection.
	CeilingWorkers int
	// ComparePartitions runs the drover figure again at each of these
	// partition counts and prints the ratio of the last to the first.
	ComparePartitions []int
	// Idle > 0 measures only a node with that many idle units (memory
	// sources, SQLite), over IdleWindow (default 60 s). Needs Binary.
	Idle       int
	IdleWindow time.Duration
	// Dir holds the SQLite file and node configs and logs; "": a temporary
	// directory, removed at the end.
	Dir string
}

// Limits of Options, checked by Validate.
const (
	MaxPartitions = 4096
	MaxMessages   = 50_000_000
	MaxPayload    = 1 << 20
	MaxBatch      = 10_000 // config's batch_size bound
	MaxNodes      = 16
	MaxIdle       = 100_000
)

func (o Options) withDefaults() Options {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.Partitions, 12)
	def(&o.Messages, 300_000)
	def(&o.Keys, 100_000)
	def(&o.Batch, 500)
	def(&o.Payload, 200)
	def(&o.CeilingWorkers, 12)
	if o.MaxWait == 0 {
		o.MaxWait = 200 * time.Millisecond
	}
	if o.LatencyFor == 0 {
		o.LatencyFor = 10 * time.Second
	}
	if o.IdleWindow == 0 {
		o.IdleWindow = 60 * time.Second
	}
	return o
}

// Validate checks the options; each error names the `drover bench` flag.
func (o Options) Validate() error {
	o = o.withDefaults()
	var errs []error
	between := func(flag string, v, lo, hi int) {
		if v < lo || v > hi {
			errs = append(errs, fmt.Errorf("--%s %d: must be between %d and %d", flag, v, lo, hi))
		}
	}
	between("partitions", o.Partitions, 1, MaxPartitions)
	between("messages", o.Messages, 1, MaxMessages)
	between("keys", o.Keys, 1, MaxMessages)
	between("batch", o.Batch, 1, MaxBatch)
	between("payload", o.Payload, MinPayload, MaxPayload)
	between("nodes", o.Nodes, 0, MaxNodes)
	between("rate", o.Rate, 0, 10_000_000)
	between("idle", o.Idle, 0, MaxIdle)
	between("ceiling-workers", o.CeilingWorkers, 1, 256)
	if o.MaxWait < time.Millisecond || o.MaxWait > time.Minute {
		errs = append(errs, fmt.Errorf("--max-wait %s: must be between 1ms and 1m", o.MaxWait))
	}
	if o.LatencyFor < 0 || o.LatencyFor > time.Hour {
		errs = append(errs, fmt.Errorf("--latency-for %s: must be between 0 and 1h", o.LatencyFor))
	}
	if o.IdleWindow < time.Second || o.IdleWindow > time.Hour {
		errs = append(errs, fmt.Errorf("--idle-window %s: must be between 1s and 1h", o.IdleWindow))
	}
	for _, p := range o.ComparePartitions {
		if p < 1 || p > MaxPartitions {
			errs = append(errs, fmt.Errorf("--compare-partitions %d: each count must be between 1 and %d", p, MaxPartitions))
		}
	}
	if len(o.ComparePartitions) == 1 {
		errs = append(errs, errors.New("--compare-partitions: give at least two counts (64,1024)"))
	}
	switch {
	case o.Store == "" || o.Store == "postgres":
	case postgresURL(o.Store):
		if _, err := stores.Parse(o.Store); err != nil {
			errs = append(errs, fmt.Errorf("--store: %w", err))
		}
	default:
		errs = append(errs, fmt.Errorf("--store %s: want postgres (a throwaway server), postgres://… or nothing (SQLite)", redact.URL(o.Store)))
	}
	if o.Idle > 0 && o.Store != "" {
		errs = append(errs, errors.New("--idle runs on SQLite: drop --store"))
	}
	if (o.Nodes > 0 || o.Idle > 0) && o.Binary == "" {
		errs = append(errs, errors.New("--nodes and --idle start node processes: Options.Binary is required"))
	}
	return errors.Join(errs...)
}

// Result holds the figures of a run, in messages per second.
type Result struct {
	Partitions, Messages  int
	Drover, Ceiling, Loop float64
	// Rows is how many records drover left, each checked against the last
	// message produced for its key.
	Rows int
	// Latency: Rate is what was published, Count how many were measured.
	Rate          int
	Count         int
	P50, P99, Max time.Duration
	// Compare is the drover figure at each Options.ComparePartitions count.
	Compare []float64
	Idle    *IdleResult
}

// VsCeiling is Drover / Ceiling.
func (r Result) VsCeiling() float64 {
	if r.Ceiling == 0 {
		return 0
	}
	return r.Drover / r.Ceiling
}

// Line is the last line Run prints.
func (r Result) Line() string {
	return fmt.Sprintf("bench: partitions=%d messages=%d drover=%.0f ceiling=%.0f vs_ceiling=%.2f p50=%s p99=%s loop=%.0f max=%s",
		r.Partitions, r.Messages, r.Drover, r.Ceiling, r.VsCeiling(), ms(r.P50), ms(r.P99), r.Loop, ms(r.Max))
}

func ms(d time.Duration) string {
	if d == 0 {
		return "-" // not measured
	}
	return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
}

// Run measures what o asks and prints a line per figure to out, the last
// being Result.Line (or, with Idle, IdleResult.Line).
func Run(ctx context.Context, o Options, out io.Writer) (Result, error) {
	if err := o.Validate(); err != nil {
		return Result{}, err
	}
	o = o.withDefaults()
	if o.Dir == "" {
		dir, err := os.MkdirTemp("", "drover-bench-")
		if err != nil {
			return Result{}, err
		}
		defer os.RemoveAll(dir)
		o.Dir = dir
	} else if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return Result{}, err
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return Result{}, err
	}
	o.Dir = dir
	if o.Idle > 0 {
		ir, err := runIdle(ctx, o, out)
		return Result{Idle: ir}, err
	}

	storeURL, kind, cleanup, err := prepareStore(ctx, o, out)
	if err != nil {
		return Result{}, err
	}
	defer cleanup()

	res := Result{Partitions: o.Partitions, Messages: o.Messages}
	w := newWorkload(o.Partitions, o.Messages, o.Keys, o.Payload)
	fmt.Fprintf(out, "bench: store %s, kfake in process, %d partitions, %d messages over %d keys, %d-byte payloads, batch %d, max_wait %s; %d CPUs, load average %s\n",
		kind, o.Partitions, o.Messages, o.Keys, o.Payload, o.Batch, o.MaxWait, runtime.NumCPU(), loadAverage())

	env, err := newEnv(ctx, o, storeURL, kind)
	if err != nil {
		return res, err
	}
	defer env.close()

	k, err := startKafka(ctx, w, "bench_drover", "bench_loop")
	if err != nil {
		return res, err
	}
	defer k.Close()
	addr := k.ListenAddrs()[0]

	// (a) and, on the same node, the latency
	a, err := env.runDrover(ctx, addr, w, "bench_drover", true, out)
	if err != nil {
		return res, err
	}
	res.Drover, res.Rows = a.rate, a.rows
	if a.lat != nil {
		res.Rate, res.Count, res.P50, res.P99, res.Max = a.lat.rate, a.lat.count, a.lat.p50, a.lat.p99, a.lat.max
	}

	// (b)
	if res.Ceiling, err = env.runCeiling(ctx, w, out); err != nil {
		return res, err
	}
	// (c)
	if res.Loop, err = env.runLoop(ctx, addr, w, out); err != nil {
		return res, err
	}

	for _, p := range o.ComparePartitions {
		cw := newWorkload(p, o.Messages, o.Keys, o.Payload)
		topic := fmt.Sprintf("bench_p%d", p)
		ck, err := startKafka(ctx, cw, topic)
		if err != nil {
			return res, err
		}
		r, err := env.runDrover(ctx, ck.ListenAddrs()[0], cw, topic, false, out)
		ck.Close()
		if err != nil {
			return res, err
		}
		res.Compare = append(res.Compare, r.rate)
	}
	if n := len(res.Compare); n > 1 && res.Compare[0] > 0 {
		fmt.Fprintf(out, "compare: partitions %d vs %d: %.0f vs %.0f msg/s, ratio %.2f\n",
			o.ComparePartitions[n-1], o.ComparePartitions[0], res.Compare[n-1], res.Compare[0], res.Compare[n-1]/res.Compare[0])
	}
	fmt.Fprintln(out, res.Line())
	return res, nil
}

// prepareStore resolves Options.Store to a URL: a SQLite file in Dir, a
// throwaway PostgreSQL, or the given URL. cleanup stops what it started.
func prepareStore(ctx context.Context, o Options, out io.Writer) (url, kind string, cleanup func(), err error) {
	switch o.Store {
	case "":
		return "sqlite:" + filepath.Join(o.Dir, "bench.db"), "sqlite", func() {}, nil
	case "postgres":
		bin, looked := pglocal.FindBin("")
		if bin == "" {
			return "", "", nil, fmt.Errorf("--store postgres: %w: no initdb and pg_ctl (looked in %s); or give --store postgres://…", pglocal.ErrUnavailable, looked)
		}
		c, err := pglocal.Init(ctx, bin, "drover-bench-pg-")
		if err != nil {
			return "", "", nil, fmt.Errorf("--store postgres: %w", err)
		}
		if err := c.Start(ctx); err != nil {
			return "", "", nil, errors.Join(fmt.Errorf("--store postgres: %w", err), c.Remove())
		}
		fmt.Fprintf(out, "bench: throwaway PostgreSQL (%s, fsync off) on %s\n", bin, c.URL())
		return c.URL(), "postgres (throwaway)", func() { _ = c.Remove() }, nil
	}
	return o.Store, "postgres " + redact.URL(o.Store), func() {}, nil
}

// loadAverage is the 1-minute load average (Linux), or "unknown": figures
// taken on a busy machine are lower, and the header says how busy it was.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "unknown"
}

// postgresURL says whether store has the postgres:// or postgresql://
// scheme, in any case, as the store opener reads it.
func postgresURL(store string) bool {
	scheme, _, ok := strings.Cut(store, "://")
	return ok && (strings.EqualFold(scheme, "postgres") || strings.EqualFold(scheme, "postgresql"))
}
