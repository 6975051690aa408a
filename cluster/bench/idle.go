package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/drover-dev/drover/internal/freeport"
	"github.com/drover-dev/drover/persistence/stores"
)

// IdleResult is the idle figure: a node process with one idle unit, then
// one with Units, each on a fresh SQLite file, every unit a partition of a
// memory source that never receives a message.
type IdleResult struct {
	Units int
	// RSS and BaseRSS are the resident memory (bytes) of the Units-unit
	// and of the 1-unit node: the median of its samples, one a second
	// over the second half of the node's window and one at its end (the
	// first half leaves the start-up to settle: units passivate, the
	// scavenger returns the start's heap). A single reading moved
	// by up to 9 MB from run to run with the GC cycle it fell in (the
	// 1-unit node's heap is a few MB); RSSMax and BaseRSSMax are the
	// largest samples.
	RSS, BaseRSS       int64
	RSSMax, BaseRSSMax int64
	// CPU and BaseCPU are the node's CPU time over its window, in percent
	// of one core.
	CPU, BaseCPU float64
	// Window is the Units-unit node's; the 1-unit node's is at most 10 s.
	Window, BaseWindow time.Duration
}

// PerUnit is the resident memory per unit above the 1-unit node, in bytes.
func (r IdleResult) PerUnit() float64 {
	if r.Units <= 1 {
		return 0
	}
	return float64(r.RSS-r.BaseRSS) / float64(r.Units-1)
}

// Line is the last line Run prints with Options.Idle.
func (r IdleResult) Line() string {
	return fmt.Sprintf("bench: idle units=%d rss=%.1fMB base_rss=%.1fMB per_unit=%.1fKB cpu=%.1f%% base_cpu=%.1f%% window=%s rss_max=%.1fMB base_rss_max=%.1fMB",
		r.Units, mb(r.RSS), mb(r.BaseRSS), r.PerUnit()/1024, r.CPU, r.BaseCPU, r.Window, mb(r.RSSMax), mb(r.BaseRSSMax))
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

// maxMemoryPartitions is the most partitions config allows a memory source.
const maxMemoryPartitions = 1024

func runIdle(ctx context.Context, o Options, out io.Writer) (*IdleResult, error) {
	res := &IdleResult{Units: o.Idle, Window: o.IdleWindow, BaseWindow: min(o.IdleWindow, 10*time.Second)}
	fmt.Fprintf(out, "bench: idle units on memory sources, SQLite, one node process each: 1 unit (%s), then %d units (%s)\n",
		res.BaseWindow, o.Idle, o.IdleWindow)
	var err error
	if res.BaseRSS, res.BaseRSSMax, res.BaseCPU, err = idleNode(ctx, o, 1, res.BaseWindow); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "idle: 1 unit: rss=%.1fMB (median of one sample a second; max %.1fMB) cpu=%.1f%% of a core over %s\n",
		mb(res.BaseRSS), mb(res.BaseRSSMax), res.BaseCPU, res.BaseWindow)
	if res.RSS, res.RSSMax, res.CPU, err = idleNode(ctx, o, o.Idle, o.IdleWindow); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "idle: %d units: rss=%.1fMB (median of one sample a second; max %.1fMB; %.1fKB per unit above 1 unit) cpu=%.1f%% of a core over %s\n",
		o.Idle, mb(res.RSS), mb(res.RSSMax), res.PerUnit()/1024, res.CPU, o.IdleWindow)
	fmt.Fprintln(out, res.Line())
	return res, nil
}

// idleNode runs a node process with units idle units until every unit
// has opened (its start is recorded as a checkpoint), then measures its
// CPU over window and its RSS over the window's second half (median and
// largest sample).
func idleNode(ctx context.Context, o Options, units int, window time.Duration) (rss, rssMax int64, cpu float64, err error) {
	dbPath := filepath.Join(o.Dir, fmt.Sprintf("idle-%d.db", units))
	for _, f := range []string{dbPath, dbPath + "-wal", dbPath + "-shm"} {
		// a fresh store: units whose start an earlier run recorded would
		// count as open at once, and the window would measure start-up
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return 0, 0, 0, fmt.Errorf("idle store: %w", err)
		}
	}
	storeURL := "sqlite:" + dbPath
	st, err := stores.Open(ctx, storeURL, stores.Options{})
	if err != nil {
		return 0, 0, 0, fmt.Errorf("idle store: %w", err)
	}
	defer st.Close()
	ports, err := freeport.Take(1)
	if err != nil {
		return 0, 0, 0, err
	}
	name := fmt.Sprintf("idle-%d", units)
	cfg, names, sizes := IdleConfig(name, ports[0], units)
	path := filepath.Join(o.Dir, name+".yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return 0, 0, 0, err
	}
	p, err := startProc(o.Binary, name, path, filepath.Join(o.Dir, name+".log"), []string{storeEnv + "=" + storeURL})
	if err != nil {
		return 0, 0, 0, err
	}
	s := &nodeSet{procs: []*proc{p}}
	defer s.stop()

	// every unit open
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute+time.Duration(units)*20*time.Millisecond)
	defer cancel()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for opened := 0; opened < units; {
		opened = 0
		for i, src := range names {
			cps, err := st.Checkpoints(wctx, src)
			if err == nil {
				opened += min(len(cps), sizes[i])
			}
		}
		if err := s.dead(); err != nil {
			return 0, 0, 0, err
		}
		select {
		case <-wctx.Done():
			return 0, 0, 0, fmt.Errorf("idle: %d of %d units opened in time; see %s", opened, units, p.log)
		case <-t.C:
		}
	}

	pid := p.cmd.Process.Pid
	c0, err := cpuTicks(pid)
	if err != nil {
		return 0, 0, 0, err
	}
	began := time.Now()
	var samples []int64
	every := time.NewTicker(time.Second)
	defer every.Stop()
	end := time.After(window)
	for done := false; !done; {
		select {
		case <-ctx.Done():
			return 0, 0, 0, ctx.Err()
		case <-every.C:
		case <-end:
			done = true
		}
		if !done && time.Since(began) < window/2 {
			continue
		}
		b, err := residentBytes(pid)
		if err != nil {
			return 0, 0, 0, err
		}
		samples = append(samples, b)
	}
	c1, err := cpuTicks(pid)
	if err != nil {
		return 0, 0, 0, err
	}
	took := time.Since(began)
	// /proc counts CPU in clock ticks, USER_HZ: 100 on Linux
	cpu = float64(c1-c0) / 100 / took.Seconds() * 100
	rss, rssMax = medianMax(samples)
	return rss, rssMax, cpu, s.dead()
}

// IdleConfig is the config of an idle node named name with units idle
// units: memory sources of at most 1,024 partitions, gossip on 127.0.0.1
// at port bind, the store's URL in the environment variable
// IdleStoreEnv. It returns the sources' names and their sizes too.
func IdleConfig(name string, bind, units int) (cfg string, names []string, sizes []int) {
	var sources strings.Builder
	for left, i := units, 0; left > 0; i++ {
		n := min(left, maxMemoryPartitions)
		left -= n
		src := fmt.Sprintf("idle_%d", i)
		names, sizes = append(names, src), append(sizes, n)
		fmt.Fprintf(&sources, "  - name: %s\n    type: memory\n    memory: {partitions: %d}\n    records: {table: %s}\n", src, n, src)
	}
	cfg = fmt.Sprintf("# drover bench idle node (generated)\nnode:\n  name: %s\n  debug_addr: 127.0.0.1:0\ncluster:\n  bind: 127.0.0.1:%d\n  profile: fast\nstore:\n  url: ${env:%s}\nlog:\n  level: warn\nsources:\n%s",
		name, bind, IdleStoreEnv, sources.String())
	return cfg, names, sizes
}

// IdleStoreEnv names the environment variable an IdleConfig reads its
// store URL from.
const IdleStoreEnv = storeEnv

// cpuTicks is the process's user + system time in clock ticks
// (/proc/PID/stat fields 14 and 15).
func cpuTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("idle: CPU time needs Linux's /proc: %w", err)
	}
	// the command name (field 2) is in parentheses and may hold spaces
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("idle: /proc/%d/stat: %d fields", pid, len(f))
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("idle: /proc/%d/stat: utime %q stime %q", pid, f[11], f[12])
	}
	return u + s, nil
}

// medianMax is the median (the lower middle of an even count) and the
// largest of samples, which must not be empty.
func medianMax(samples []int64) (median, largest int64) {
	sorted := slices.Sorted(slices.Values(samples))
	return sorted[(len(sorted)-1)/2], sorted[len(sorted)-1]
}

// residentBytes is VmRSS of /proc/PID/status.
func residentBytes(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("idle: memory needs Linux's /proc: %w", err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("idle: VmRSS %q", v)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("idle: no VmRSS in /proc/%d/status", pid)
}
