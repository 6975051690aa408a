package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/drover-dev/drover/cluster/config"
	"github.com/drover-dev/drover/cluster/node"
	"github.com/drover-dev/drover/internal/freeport"
	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/persistence/stores"
)

// pollEvery is how often the end of a drover run is looked for.
const pollEvery = 10 * time.Millisecond

// storeEnv is the environment variable the node configs read the store
// URL from (a URL with a password is a secret in a config).
const storeEnv = "DROVER_BENCH_STORE"

// env is what the figures of one run share: the store, opened by drover's
// own code (for checkpoints and records) and as plain SQL.
type env struct {
	o        Options
	storeURL string
	kind     string
	store    persistence.Store
	db       db
}

func newEnv(ctx context.Context, o Options, storeURL, kind string) (*env, error) {
	st, err := stores.Open(ctx, storeURL, stores.Options{}) // migrates
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	// The bench only reads through drover's store (checkpoints, records):
	// read-only, it runs no WAL checkpointer of its own beside the node's
	// on a SQLite file.
	if err := st.Close(); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	if st, err = stores.Open(ctx, storeURL, stores.Options{ReadOnly: true}); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	d, err := openDB(ctx, storeURL, o.CeilingWorkers)
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	e := &env{o: o, storeURL: storeURL, kind: kind, store: st, db: d}
	sources := []string{"bench_drover", "bench_ceiling", "bench_loop"}
	for _, p := range o.ComparePartitions {
		sources = append(sources, fmt.Sprintf("bench_p%d", p))
	}
	if err := d.reset(ctx, sources); err != nil {
		e.close()
		return nil, err
	}
	return e, nil
}

func (e *env) close() {
	e.db.close()
	_ = e.store.Close()
}

// startKafka starts kfake with the topics and preloads w into each.
func startKafka(ctx context.Context, w *workload, topics ...string) (*kfake.Cluster, error) {
	k, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(w.partitions), topics...))
	if err != nil {
		return nil, fmt.Errorf("start kfake: %w", err)
	}
	for _, t := range topics {
		if err := w.preload(ctx, k.ListenAddrs()[0], t); err != nil {
			k.Close()
			return nil, err
		}
	}
	return k, nil
}

type droverResult struct {
	rate float64
	rows int
	lat  *latResult
}

// runDrover is figure (a) on a fresh topic named source (and, with
// latency, the latency figure on the same nodes).
func (e *env) runDrover(ctx context.Context, addr string, w *workload, source string, latency bool, out io.Writer) (droverResult, error) {
	var res droverResult
	began := time.Now()
	nodes, err := e.startNodes(ctx, addr, source)
	if err != nil {
		return res, err
	}
	defer nodes.stop()
	limit := 60*time.Second + time.Duration(w.messages)*time.Millisecond // 1,000 msg/s at least
	if err := e.waitEnds(ctx, source, w.ends(), limit, nodes); err != nil {
		return res, fmt.Errorf("drover: %w", err)
	}
	took := time.Since(began)
	res.rate = float64(w.messages) / took.Seconds()
	if res.rows, err = e.verify(ctx, source, w); err != nil {
		return res, fmt.Errorf("drover: %w", err)
	}
	fmt.Fprintf(out, "drover: %d partitions, %d messages in %s = %.0f msg/s (%s; node start to every checkpoint at its partition's end; %d rows, each the last document of its key)\n",
		w.partitions, w.messages, took.Round(time.Millisecond), res.rate, nodes.what, res.rows)
	if latency && !e.o.SkipLatency {
		rate := e.o.Rate
		if rate == 0 {
			rate = max(1, int(res.rate/2))
		}
		if res.lat, err = e.runLatency(ctx, addr, w, source, rate, nodes); err != nil {
			return res, fmt.Errorf("latency: %w", err)
		}
		fmt.Fprintln(out, res.lat.line())
	}
	return res, nil
}

// waitEnds polls the source's checkpoints until each partition's reaches
// ends[p], within limit.
func (e *env) waitEnds(ctx context.Context, source string, ends []int64, limit time.Duration, nodes *nodeSet) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	behind := len(ends)
	for {
		cps, err := e.store.Checkpoints(ctx, source)
		if err == nil {
			at := positions(source, cps)
			behind = 0
			for p, end := range ends {
				if off, ok := at[p]; end >= 0 && (!ok || off < end) {
					behind++
				}
			}
			if behind == 0 {
				return nil
			}
		}
		if dead := nodes.dead(); dead != nil {
			return dead
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d partitions not applied to their end within %s (last store error: %v)", behind, len(ends), limit, err)
		case <-t.C:
		}
	}
}

// positions maps partition → checkpointed offset (-1: a start marker; a
// partition with no checkpoint is missing).
func positions(source string, cps []persistence.Checkpoint) map[int]int64 {
	at := map[int]int64{}
	for _, c := range cps {
		p, err := strconv.Atoi(strings.TrimPrefix(c.Unit, source+"/"))
		if err != nil {
			continue
		}
		off, err := strconv.ParseInt(c.Position, 10, 64)
		if err != nil {
			off = -1 // a start marker
		}
		at[p] = off
	}
	return at
}

// verify reads the records table back: one row per key, each holding the
// last message produced for its key.
func (e *env) verify(ctx context.Context, table string, w *workload) (int, error) {
	want := w.expected()
	rows, after := 0, ""
	for {
		page, err := e.store.Records(ctx, table, after, 10_000)
		if err != nil {
			return rows, err
		}
		if len(page) == 0 {
			break
		}
		for _, r := range page {
			var doc struct {
				Seq int `json:"seq"`
			}
			if err := json.Unmarshal(r.Doc, &doc); err != nil {
				return rows, fmt.Errorf("row %s: %w", r.Key, err)
			}
			seq, ok := want[r.Key]
			if !ok || doc.Seq != seq {
				return rows, fmt.Errorf("row %s holds seq %d, want %d (present: %v)", r.Key, doc.Seq, seq, ok)
			}
			rows++
		}
		after = page[len(page)-1].Key
	}
	if rows != len(want) {
		return rows, fmt.Errorf("%d rows in %s, want %d (one per key)", rows, table, len(want))
	}
	return rows, nil
}

// nodeSet is the drover nodes of a run: one in this process, or node
// processes.
type nodeSet struct {
	what     string
	inner    *node.Node
	innerLog *os.File // its warnings and errors
	procs    []*proc
}

type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// nodeConfig is node i's config (of n) for source.
func (e *env) nodeConfig(name, bind string, join []string, addr, source string) string {
	quoted := make([]string, len(join))
	for i, j := range join {
		quoted[i] = strconv.Quote(j)
	}
	return fmt.Sprintf(`# drover bench node (generated)
node:
  name: %s
  debug_addr: 127.0.0.1:0
cluster:
  bind: %s
  join: [%s]
  profile: fast
store:
  url: ${env:%s}
log:
  level: warn
sources:
  - name: %s
    type: kafka
    kafka:
      brokers: [%q]
      topic: %s
    records:
      table: %s
      key: id
    batch_size: %d
    max_wait: %s
`, name, bind, strings.Join(quoted, ", "), storeEnv, source, addr, source, source, e.o.Batch, e.o.MaxWait)
}

func (e *env) startNodes(ctx context.Context, addr, source string) (*nodeSet, error) {
	if e.o.Nodes == 0 {
		yaml := e.nodeConfig("bench-1", "127.0.0.1:0", nil, addr, source)
		cfg, err := config.Parse([]byte(yaml), config.Options{LookupEnv: func(name string) (string, bool) {
			if name == storeEnv {
				return e.storeURL, true
			}
			return "", false
		}})
		if err != nil {
			return nil, fmt.Errorf("bench node config: %w", err)
		}
		logPath := filepath.Join(e.o.Dir, source+"-bench-1.log")
		logf, err := os.Create(logPath)
		if err != nil {
			return nil, err
		}
		log := slog.New(slog.NewTextHandler(logf, &slog.HandlerOptions{Level: slog.LevelWarn}))
		n, err := node.Start(ctx, cfg, node.Options{Version: "bench", Logger: log})
		if err != nil {
			logf.Close()
			return nil, fmt.Errorf("start node: %w", err)
		}
		return &nodeSet{what: "one node in this process", inner: n, innerLog: logf}, nil
	}
	ports, err := freeport.Take(e.o.Nodes)
	if err != nil {
		return nil, err
	}
	gossip := make([]string, len(ports))
	for i, p := range ports {
		gossip[i] = "127.0.0.1:" + strconv.Itoa(p)
	}
	s := &nodeSet{what: fmt.Sprintf("%d node processes", e.o.Nodes)}
	if e.o.Nodes == 1 {
		s.what = "one node process"
	}
	for i := range e.o.Nodes {
		name := fmt.Sprintf("bench-%d", i+1)
		var join []string
		for j, g := range gossip {
			if j != i {
				join = append(join, g)
			}
		}
		path := filepath.Join(e.o.Dir, source+"-"+name+".yaml")
		if err := os.WriteFile(path, []byte(e.nodeConfig(name, gossip[i], join, addr, source)), 0o644); err != nil {
			s.stop()
			return nil, err
		}
		p, err := startProc(e.o.Binary, name, path, strings.TrimSuffix(path, ".yaml")+".log", []string{storeEnv + "=" + e.storeURL})
		if err != nil {
			s.stop()
			return nil, err
		}
		s.procs = append(s.procs, p)
	}
	return s, nil
}

// startProc starts `drover node --config path` with its output in logPath.
func startProc(bin, name, path, logPath string, env []string) (*proc, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "node", "--config", path, "--grace", "20s")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	return p, nil
}

// dead is an error when a node process has exited.
func (s *nodeSet) dead() error {
	for _, p := range s.procs {
		select {
		case <-p.done:
			return fmt.Errorf("node %s exited (%v); see %s", p.name, p.err, p.log)
		default:
		}
	}
	return nil
}

// stop stops every node gracefully (SIGTERM, then SIGKILL after 20 s) and
// waits for them.
func (s *nodeSet) stop() {
	if s.inner != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		_ = s.inner.Shutdown(ctx)
		cancel()
		_ = s.innerLog.Close()
	}
	for _, p := range s.procs {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range s.procs {
		select {
		case <-p.done:
		case <-time.After(20 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
}
