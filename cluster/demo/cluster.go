package demo

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/drover-dev/drover/internal/freeport"
	"github.com/drover-dev/drover/internal/srtest"
	"github.com/drover-dev/drover/internal/tcpproxy"
)

// Config describes a demo cluster.
type Config struct {
	// Dir holds the node configs, logs and the SQLite file. It must be
	// new, empty or a previous demo's (ClaimDir).
	Dir string
	// Binary is the drover executable started for each node.
	Binary string
	// Nodes is how many node processes start (default 3).
	Nodes int
	// Partitions of the demo topic (default 12).
	Partitions int
	// StoreURL is the store; default sqlite:<Dir>/drover.db.
	StoreURL string
	// Profile is the membership profile (default fast).
	Profile string
	// KafkaPort, NATSPort, PubSubPort, RegistryPort (the schema
	// registry), GossipPort and DebugPort are the ports used (node i uses
	// GossipPort+i-1 and DebugPort+i-1); 0 picks free ports.
	KafkaPort, NATSPort, PubSubPort, RegistryPort, GossipPort, DebugPort int
	// BatchSize and MaxWait of the sources (defaults 200, 200ms).
	BatchSize int
	MaxWait   time.Duration
	// Join returns node i's join list (i from 0) given every node's gossip
	// address; nil: every node joins every other.
	Join func(i int, gossip []string) []string
	// ProxyStore puts a TCP proxy (run by the demo process) between each
	// node and the store, so that CutStore can cut one node's store
	// connections. It needs a networked store: a postgres:// URL with one
	// host.
	ProxyStore bool
	// Extra is YAML appended to every node's sources: list (entries
	// indented as the generated ones: "  - name: …"). The demo neither
	// counts nor verifies their units: the test that adds them does.
	Extra string
	// Log receives progress lines; nil discards.
	Log io.Writer
}

// Cluster is a running demo cluster.
type Cluster struct {
	cfg   Config
	kafka *kfake.Cluster
	q     *queues
	reg   *srtest.Registry // the schema registry of orders_avro
	// avroSchemaID is the order schema's id in reg.
	avroSchemaID int
	nodes        []*Node
	log          io.Writer
	mu           sync.Mutex
	added        []string // audit sources added by AddAuditSource, in order
	// ports holds the gossip and debug ports picked for the nodes against
	// other freeport users until Close (nodes restart on them).
	ports []*freeport.Reservation

	closeOnce sync.Once
}

// Node is one node process.
type Node struct {
	Name       string
	ConfigPath string
	LogPath    string
	DebugAddr  string
	GossipAddr string
	// StoreURL is the store as the node reaches it: through its proxy
	// with Config.ProxyStore, else the cluster's.
	StoreURL string
	proxy    *tcpproxy.Proxy // nil without Config.ProxyStore
	join     []string
	added    []string // AddAuditSource's sources in this node's config
	// auditExtra are lines ChangeAuditSource put in the audit source's
	// entry; extra, when set, replaces Config.Extra (SetExtra).
	auditExtra string
	extra      *string
	mu         sync.Mutex
	cmd        *exec.Cmd
	done       chan struct{}
	exitErr    error
	// stopped is set when the demo signals the process: an exit without
	// it is unexpected, and reported with the tail of the node's log.
	stopped bool
}

// Start starts Kafka and writes the node configs; StartNode starts each.
func Start(cfg Config) (*Cluster, error) {
	if cfg.Nodes <= 0 {
		cfg.Nodes = 3
	}
	if cfg.Partitions <= 0 {
		cfg.Partitions = 12
	}
	if cfg.Profile == "" {
		cfg.Profile = "fast"
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 200
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = 200 * time.Millisecond
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.Binary == "" {
		return nil, errors.New("demo: Binary is required")
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, err
	}
	cfg.Dir = dir
	if err := ClaimDir(dir); err != nil { // before startQueues empties nats/
		return nil, fmt.Errorf("demo: %w", err)
	}
	if cfg.StoreURL == "" {
		cfg.StoreURL = "sqlite:" + filepath.Join(dir, "drover.db")
	}
	c := &Cluster{cfg: cfg, log: cfg.Log}
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(int32(cfg.Partitions), Topic), kfake.SeedTopics(AvroPartitions, AvroTopic)}
	if cfg.KafkaPort > 0 {
		opts = append(opts, kfake.Ports(cfg.KafkaPort))
	}
	c.kafka, err = kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("demo: start Kafka (kfake): %w", err)
	}
	if c.q, err = startQueues(dir, cfg.NATSPort, cfg.PubSubPort); err != nil {
		c.Close()
		return nil, err
	}
	if c.reg, c.avroSchemaID, err = startRegistry(cfg.RegistryPort); err != nil {
		c.Close()
		return nil, err
	}
	gossip, err := c.pickPorts(cfg.GossipPort, cfg.Nodes)
	if err != nil {
		c.Close()
		return nil, err
	}
	debug, err := c.pickPorts(cfg.DebugPort, cfg.Nodes)
	if err != nil {
		c.Close()
		return nil, err
	}
	var storeAddr string
	if cfg.ProxyStore {
		if storeAddr, err = storeHostPort(cfg.StoreURL); err != nil {
			c.Close()
			return nil, err
		}
	}
	gossipAddrs := make([]string, cfg.Nodes)
	for i, p := range gossip {
		gossipAddrs[i] = "127.0.0.1:" + strconv.Itoa(p)
	}
	for i := 0; i < cfg.Nodes; i++ {
		n := &Node{
			Name:       "node-" + strconv.Itoa(i+1),
			GossipAddr: gossipAddrs[i],
			DebugAddr:  "127.0.0.1:" + strconv.Itoa(debug[i]),
		}
		n.StoreURL = cfg.StoreURL
		if cfg.ProxyStore {
			if n.proxy, err = tcpproxy.New(storeAddr); err != nil {
				c.Close()
				return nil, fmt.Errorf("demo: store proxy for %s: %w", n.Name, err)
			}
			n.StoreURL = viaProxy(cfg.StoreURL, n.proxy.Addr())
		}
		n.ConfigPath = filepath.Join(dir, n.Name+".yaml")
		n.LogPath = filepath.Join(dir, n.Name+".log")
		// every node lists every other as a seed, as the README asks: a
		// node restarted while some seeds are down still finds a live one
		var join []string
		for j, a := range gossipAddrs {
			if j != i {
				join = append(join, a)
			}
		}
		if cfg.Join != nil {
			join = cfg.Join(i, slices.Clone(gossipAddrs))
		}
		n.join = join
		if err := c.writeConfig(n); err != nil {
			c.Close()
			return nil, err
		}
		c.nodes = append(c.nodes, n)
	}
	return c, nil
}

// MaxMessageBytes is the orders source's limit; the producer makes a few
// messages a little bigger, which must be dead-lettered.
const MaxMessageBytes = 16 << 10

// Topic is the demo's Kafka topic; two sources read it: "orders" in
// records mode and "audit" with the built-in audit handler.
const Topic = "orders"

// writeConfig writes n's config file.
func (c *Cluster) writeConfig(n *Node) error {
	if err := os.WriteFile(n.ConfigPath, []byte(c.nodeConfig(n)), 0o644); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	return nil
}

// AddAuditSource adds a source to n's config (a rolling config change):
// name reads the demo topic from the earliest offset with the audit
// handler, as "audit" does. The node runs it from its next start; Units,
// Drained and Verify count it from now on, so the cluster converges only
// once a running node has it.
func (c *Cluster) AddAuditSource(n *Node, name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if name == "" || slices.Contains([]string{"orders", "audit", AvroTopic}, name) || slices.Contains(n.added, name) {
		return fmt.Errorf("demo: %s: cannot add source %q: empty or already there", n.Name, name)
	}
	for _, q := range queueSources {
		if q.name == name {
			return fmt.Errorf("demo: %s: cannot add source %q: a queue source has that name", n.Name, name)
		}
	}
	n.added = append(n.added, name)
	if !slices.Contains(c.added, name) {
		c.added = append(c.added, name)
	}
	return c.writeConfig(n)
}

// ChangeAuditSource puts lines (indented as the source's other settings:
// "    max_consecutive_failures: 7\n") into the audit source's entry of
// n's config, a change of its settings that Verify does not see.
func (c *Cluster) ChangeAuditSource(n *Node, lines string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n.auditExtra = lines
	return c.writeConfig(n)
}

// SetExtra replaces Config.Extra in n's config (a source removed from it,
// for one).
func (c *Cluster) SetExtra(n *Node, yaml string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n.extra = &yaml
	return c.writeConfig(n)
}

// Added are the sources AddAuditSource added to some node.
func (c *Cluster) Added() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.added)
}

// auditSources are "audit" and the sources AddAuditSource added.
func (c *Cluster) auditSources() []string { return append([]string{"audit"}, c.Added()...) }

func (c *Cluster) addedConfig(n *Node) string {
	var b strings.Builder
	for _, name := range n.added {
		b.WriteString(c.auditConfig(name, "    start: earliest\n"))
	}
	return b.String()
}

// auditConfig is the entry of a source that runs the audit handler on the
// demo's topic; extra, lines of its own, goes after handler_name.
func (c *Cluster) auditConfig(name, extra string) string {
	return fmt.Sprintf(`  - name: %s
    type: kafka
    mode: handler
    handler_name: audit
%s    kafka:
      brokers: [%q]
      topic: %s
    batch_size: %d
    max_wait: %s
    lease_ttl: 10s
    discovery_interval: 5s
`, name, extra, c.KafkaAddr(), Topic, c.cfg.BatchSize, c.cfg.MaxWait)
}

func (c *Cluster) nodeConfig(n *Node) string {
	extra := c.cfg.Extra
	if n.extra != nil {
		extra = *n.extra
	}
	join := n.join
	quoted := make([]string, len(join))
	for i, j := range join {
		quoted[i] = strconv.Quote(j)
	}
	return fmt.Sprintf(`# drover demo node (generated)
node:
  name: %s
  debug_addr: %s
cluster:
  bind: %s
  join: [%s]
  profile: %s
store:
  url: ${env:DROVER_DEMO_STORE}   # set by the demo: a URL with a password is a secret
sources:
  - name: orders
    type: kafka
    kafka:
      brokers: [%q]
      topic: %s
    records:
      table: orders
      key: id
      schema: "id:int, name:text, seq:int, price:float, ok:bool"
    max_message_bytes: %d
    batch_size: %d
    max_wait: %s
    lease_ttl: 10s
    discovery_interval: 5s
`, n.Name, n.DebugAddr, n.GossipAddr, strings.Join(quoted, ", "), c.cfg.Profile,
		c.KafkaAddr(), Topic, MaxMessageBytes, c.cfg.BatchSize, c.cfg.MaxWait) +
		c.auditConfig("audit", n.auditExtra) + c.avroConfig() + c.queueConfig() + c.addedConfig(n) + extra
}

// pickPorts returns n ports from first on, or, when first is 0, n free
// ones reserved until Close (see package freeport: outside the kernel's
// ephemeral range, so that no other process's port 0 or connection takes
// one before, or between two runs of, the node that binds it).
func (c *Cluster) pickPorts(first, n int) ([]int, error) {
	out := make([]int, n)
	if first > 0 {
		for i := range out {
			out[i] = first + i
		}
		return out, nil
	}
	r, err := freeport.Reserve(n)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	c.ports = append(c.ports, r)
	return r.Ports(), nil
}

// storeHostPort is the host:port of a postgres:// store URL with one
// host: what a node's store proxy forwards to.
func storeHostPort(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		// the URL may hold a password: do not print it
		return "", errors.New("demo: store proxies need a postgres:// URL (postgres://user@host:port/db)")
	}
	switch q := u.Query(); {
	case u.Host == "" || q.Has("host") || q.Has("port"):
		return "", errors.New("demo: store proxies need the store's host:port in the URL itself (no host= or port= option, no socket)")
	case strings.Contains(u.Host, ","):
		return "", fmt.Errorf("demo: store proxies need one store host, the URL names several (%s)", u.Host)
	}
	if u.Port() == "" {
		return net.JoinHostPort(u.Hostname(), "5432"), nil
	}
	return u.Host, nil
}

// viaProxy is the store URL with its host:port replaced by the proxy's
// (storeHostPort accepted it).
func viaProxy(raw, proxy string) string {
	u, _ := url.Parse(raw)
	u.Host = proxy
	return u.String()
}

// CutStore cuts a node's store connections (Config.ProxyStore): its proxy
// closes every open connection and refuses new ones until RestoreStore.
func (c *Cluster) CutStore(n *Node) error {
	if n.proxy == nil {
		return fmt.Errorf("demo: %s has no store proxy (Config.ProxyStore)", n.Name)
	}
	n.proxy.Stop()
	return nil
}

// RestoreStore lets a node reach its store again after CutStore.
func (c *Cluster) RestoreStore(n *Node) error {
	if n.proxy == nil {
		return fmt.Errorf("demo: %s has no store proxy (Config.ProxyStore)", n.Name)
	}
	return n.proxy.Start()
}

// KafkaAddr is the embedded Kafka's address.
func (c *Cluster) KafkaAddr() string { return c.kafka.ListenAddrs()[0] }

// NATSURL and PubSubAddr are the embedded queue servers.
func (c *Cluster) NATSURL() string    { return c.q.natsURL() }
func (c *Cluster) PubSubAddr() string { return c.q.pubsubAddr() }

// StoreURL is the store the nodes share.
func (c *Cluster) StoreURL() string { return c.cfg.StoreURL }

// Nodes are the node processes (running or not).
func (c *Cluster) Nodes() []*Node { return c.nodes }

// Node returns a node by name.
func (c *Cluster) Node(name string) (*Node, error) {
	for _, n := range c.nodes {
		if n.Name == name {
			return n, nil
		}
	}
	return nil, fmt.Errorf("demo: no node %q (have node-1..node-%d)", name, len(c.nodes))
}

// StartNode starts a node process (again).
func (c *Cluster) StartNode(n *Node) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		select {
		case <-n.done:
		default:
			return fmt.Errorf("demo: %s is running", n.Name)
		}
	}
	logf, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	cmd := exec.Command(c.cfg.Binary, "node", "--config", n.ConfigPath, "--grace", "20s")
	cmd.Env = append(os.Environ(), "DROVER_DEMO_STORE="+n.StoreURL)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("demo: start %s: %w", n.Name, err)
	}
	n.cmd, n.done, n.exitErr, n.stopped = cmd, make(chan struct{}), nil, false
	done := n.done
	go func() {
		err := cmd.Wait()
		logf.Close()
		n.mu.Lock()
		n.exitErr = err
		expected := n.stopped
		n.mu.Unlock()
		if !expected {
			// the log may live in a temporary folder that is gone by
			// the time anyone asks why the node is missing
			fmt.Fprintf(c.log, "%s (pid %d) exited without being stopped by the demo: %s; its log ends:\n%s\n",
				n.Name, cmd.Process.Pid, exitText(err), n.LogTail(logTailLines))
		}
		close(done)
	}()
	fmt.Fprintf(c.log, "started %s (pid %d): debug http://%s/debug/  log %s\n", n.Name, cmd.Process.Pid, n.DebugAddr, n.LogPath)
	return nil
}

// Running reports whether the node's process runs.
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

// Pid is the process id, 0 when not running.
func (n *Node) Pid() int {
	if !n.Running() {
		return 0
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd.Process.Pid
}

// Kill sends SIGKILL (kill -9) and waits for the process to end.
func (c *Cluster) Kill(n *Node) error { return c.signal(n, syscall.SIGKILL, 10*time.Second) }

// Term sends SIGTERM (a graceful stop) and waits up to limit for the
// process to end.
func (c *Cluster) Term(n *Node, limit time.Duration) error {
	return c.signal(n, syscall.SIGTERM, limit)
}

func (c *Cluster) signal(n *Node, sig syscall.Signal, limit time.Duration) error {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.stopped = cmd != nil
	n.mu.Unlock()
	if cmd == nil {
		return fmt.Errorf("demo: %s never started", n.Name)
	}
	if err := cmd.Process.Signal(sig); err != nil {
		if errors.Is(err, os.ErrProcessDone) {
			select { // it has exited: Wait returns soon if it has not yet
			case <-done:
			case <-time.After(limit):
			}
			return fmt.Errorf("demo: signal %s: %w: it had exited by itself (%s); its log ends:\n%s",
				n.Name, err, exitText(n.ExitError()), n.LogTail(logTailLines))
		}
		return fmt.Errorf("demo: signal %s: %w", n.Name, err)
	}
	select {
	case <-done:
		fmt.Fprintf(c.log, "%s stopped (%s)\n", n.Name, sig)
		return nil
	case <-time.After(limit):
		return fmt.Errorf("demo: %s still running %s after %s", n.Name, limit, sig)
	}
}

// ExitError is how the node's last process ended (nil: cleanly).
func (n *Node) ExitError() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.exitErr
}

// Close stops every node process — gracefully (SIGTERM), or with SIGKILL
// when one takes more than 10 s — and stops Kafka, the queues and the
// schema registry.
func (c *Cluster) Close() { c.closeOnce.Do(c.close) }

func (c *Cluster) close() {
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		if n.Running() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := c.Term(n, 10*time.Second); err != nil {
					_ = c.Kill(n)
				}
			}()
		}
	}
	wg.Wait()
	for _, n := range c.nodes {
		if n.proxy != nil {
			_ = n.proxy.Close()
		}
	}
	if c.kafka != nil {
		c.kafka.Close()
	}
	if c.q != nil {
		c.q.close()
	}
	if c.reg != nil {
		c.reg.Close()
	}
	for _, r := range c.ports {
		r.Release()
	}
}
