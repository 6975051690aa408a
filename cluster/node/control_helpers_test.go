package node

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/memory"
	"github.com/drover-dev/drover/cluster/config"
	"github.com/drover-dev/drover/persistence/stores"
)

// Helpers of the control tests (drain, reload): real nodes on one SQLite
// store, joined by memberlist on loopback, whose memory sources are
// shared by name between the nodes and outlive a node's reopening them.

// sharedStreams hands every node the same memory stream per source name.
type sharedStreams struct {
	mu      sync.Mutex
	streams map[string]*memory.Stream
	opens   map[string]int // how often each source was opened
}

// keepOpen is a stream whose Close leaves the shared stream open: a node
// closes a source it removes, the others still read it.
type keepOpen struct{ brokers.Stream }

func (keepOpen) Close() error { return nil }

func (s *sharedStreams) open(_ context.Context, src config.Source, _ *slog.Logger) (Source, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.streams == nil {
		s.streams, s.opens = map[string]*memory.Stream{}, map[string]int{}
	}
	s.opens[src.Name]++
	st, ok := s.streams[src.Name]
	if !ok {
		var err error
		if st, err = memory.NewStream(memory.StreamConfig{Partitions: src.Memory.Partitions}); err != nil {
			return Source{}, err
		}
		s.streams[src.Name] = st
	}
	return Source{Stream: keepOpen{st}}, nil
}

// opened is how often source was opened.
func (s *sharedStreams) opened(source string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opens[source]
}

// produce writes k messages to source's partitions in turn, numbered
// from first, and fails t on error.
func (s *sharedStreams) produce(t *testing.T, source string, parts, first, k int) {
	t.Helper()
	s.mu.Lock()
	st := s.streams[source]
	s.mu.Unlock()
	if st == nil {
		t.Fatalf("no stream %s opened", source)
	}
	for i := first; i < first+k; i++ {
		m := brokers.Message{Key: []byte(strconv.Itoa(i)), Value: fmt.Appendf(nil, `{"id":%d}`, i)}
		if _, err := st.Produce(strconv.Itoa(i%parts), m); err != nil {
			t.Fatal(err)
		}
	}
}

// pair is two real nodes, n1 and n2 (joining n1), on one SQLite store.
type pair struct {
	dir, url string
	streams  *sharedStreams
	addrs    [2]string
	nodes    [2]*Node
	paths    [2]string // their config files
}

// startPair starts n1 and n2, each running sources.
func startPair(t *testing.T, sources ...string) *pair {
	t.Helper()
	p := &pair{dir: t.TempDir(), streams: &sharedStreams{}}
	p.url = "sqlite:" + p.dir + "/d.db"
	p.addrs = [2]string{freeGossipAddr(t), freeGossipAddr(t)}
	for i := range p.nodes {
		p.nodes[i], p.paths[i] = startFromFile(t, p.yaml(i, sources...), p.streams)
	}
	return p
}

// yaml is node i's configuration with sources.
func (p *pair) yaml(i int, sources ...string) string {
	return controlYAML(fmt.Sprintf("n%d", i+1), p.addrs[i], p.addrs[0], p.dir, sources...)
}

// freeGossipAddr is a loopback address nobody listens on (yet).
func freeGossipAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// controlYAML is node name's configuration: gossip on bind, joining join,
// the store in dir, and the given sources (YAML flow mappings).
func controlYAML(name, bind, join, dir string, sources ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "node: {name: %s, debug_addr: \"127.0.0.1:0\"}\ncluster: {bind: %q, join: [%q], profile: fast}\nstore: {url: \"sqlite:%s/d.db\"}\nsources:\n", name, bind, join, dir)
	for _, s := range sources {
		b.WriteString("  - " + s + "\n")
	}
	return b.String()
}

// auditSource is a memory source of parts partitions applied by the audit
// handler, with extra settings.
func auditSource(name string, parts int, extra string) string {
	s := fmt.Sprintf("{name: %s, type: memory, mode: handler, handler_name: audit, memory: {partitions: %d}, lease_ttl: 3s, max_wait: 50ms", name, parts)
	if extra != "" {
		s += ", " + extra
	}
	return s + "}"
}

// startFromFile writes yaml to a config file, starts its node from it and
// closes it when the test ends (unless it was shut down).
func startFromFile(t *testing.T, yaml string, streams *sharedStreams) (*Node, string) {
	t.Helper()
	return startFromFileWith(t, yaml, Options{OpenSource: streams.open})
}

// startFromFileWith is startFromFile with opt (ConfigPath and the audit
// handler set).
func startFromFileWith(t *testing.T, yaml string, opt Options) (*Node, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "drover.yaml")
	writeFile(t, path, yaml)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	opt.ConfigPath, opt.Handlers = path, map[string]actors.Handler{"audit": AuditHandler}
	n, err := Start(t.Context(), cfg, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	return n, path
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// eventually waits, up to 20 s, until cond holds; what says what for the
// failure.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := WaitCond(t.Context(), 10*time.Millisecond, 20*time.Second, func() (bool, string) { return cond(), what }); err != nil {
		t.Fatalf("gave up waiting: %v", err)
	}
}

// unitsOf are the units node n runs of source ("" = all), by unit id, with
// their tree entries.
func unitsOf(n *Node, source string) map[string]actors.UnitStatus {
	out := map[string]actors.UnitStatus{}
	for _, s := range n.Tree().Sources {
		if source != "" && s.Name != source {
			continue
		}
		for _, u := range s.Units {
			out[u.Unit] = u
		}
	}
	return out
}

// runningAll reports whether n runs exactly units units of source, all
// running.
func runningAll(n *Node, source string, units int) bool {
	us := unitsOf(n, source)
	if len(us) != units {
		return false
	}
	for _, u := range us {
		if u.State != actors.StateRunning {
			return false
		}
	}
	return true
}

// audited counts the audit rows of source in the store at url: all of
// them and the distinct (unit, position) pairs.
func audited(t *testing.T, url, source string) (rows, distinct int) {
	t.Helper()
	err := stores.Query(context.Background(), url,
		`SELECT count(*), count(DISTINCT unit || '@' || position) FROM `+AuditTable+` WHERE source = $1`, []any{source},
		func(scan func(...any) error) error { return scan(&rows, &distinct) })
	if err != nil && !strings.Contains(err.Error(), "no such table") {
		t.Fatal(err)
	}
	return rows, distinct
}
