package node

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/actors/decode"
	"github.com/drover-dev/drover/actors/events"
	"github.com/drover-dev/drover/actors/placement"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/kafka"
	"github.com/drover-dev/drover/brokers/sqs"
	"github.com/drover-dev/drover/cluster/config"
	"github.com/drover-dev/drover/cluster/debug"
	"github.com/drover-dev/drover/cluster/gossip"
	"github.com/drover-dev/drover/cluster/metrics"
	"github.com/drover-dev/drover/cluster/tracing"
	"github.com/drover-dev/drover/internal/clock"
	"github.com/drover-dev/drover/internal/exec"
	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/persistence/stores"
)

// Options are what a node takes besides its configuration.
type Options struct {
	// Logger receives the node's logs; nil discards.
	Logger *slog.Logger
	// Version is gossiped and shown by `drover version`.
	Version string
	// Handlers are the Go handlers mode: handler sources name with
	// handler_name.
	Handlers map[string]actors.Handler
	// OpenSource opens a source's broker; nil opens it by its type.
	OpenSource func(ctx context.Context, s config.Source, log *slog.Logger) (Source, error)
	// Tuning is passed to the actors.
	Tuning actors.Tuning
	// ConfigPath is the file the configuration was read from: a reload
	// (SIGHUP, drover reload) reads it again. Empty: reloads are refused.
	ConfigPath string
}

// Source is an opened broker: exactly one of Stream and Queue.
type Source struct {
	Stream brokers.Stream
	Queue  brokers.Queue
}

// Node is a running drover node.
type Node struct {
	cfg   *config.Config
	opt   Options
	log   *slog.Logger
	store persistence.Store
	// sources are the opened brokers by source name (under mu: a reload
	// adds and removes them).
	sources map[string]Source
	member  *gossip.Membership
	pool    *exec.Pool // the goroutines of the node's jobs and mailboxes
	exec    *exec.Goroutines
	actors  *actors.Node
	debug   *debug.Server
	reg     *prometheus.Registry
	metrics *metrics.Metrics
	events  *events.Log
	tracing *tracing.Tracing // nil: tracing off (no OTEL_EXPORTER_OTLP_* endpoint)

	stopWatch func()
	capWarn   mixedCapWarner
	ctl       controls // drain, undrain, exit and reload (control_drain.go)
	cancel    context.CancelFunc
	wg        sync.WaitGroup

	mu       sync.Mutex
	storeErr error
	closed   bool

	// registries are the schema registry clients by their settings, one
	// per registry however many sources (and reloads) use it: each caches
	// the schemas it fetched (under regMu).
	regMu      sync.Mutex
	registries map[kafka.RegistryConfig]*decode.Registry
}

// registry is the node's client of the registry of d.
func (n *Node) registry(d config.Decoding) (*decode.Registry, error) {
	rc := *d.RegistryConfig()
	n.regMu.Lock()
	defer n.regMu.Unlock()
	if r := n.registries[rc]; r != nil {
		return r, nil
	}
	r, err := d.NewRegistry()
	if err != nil {
		return nil, err
	}
	if n.registries == nil {
		n.registries = map[kafka.RegistryConfig]*decode.Registry{}
	}
	n.registries[rc] = r
	return r, nil
}

// keepRegistries forgets the registry clients no source of sources uses
// (after a reload: a rotated password or a removed registry), so a client
// holding a password no longer configured does not live as long as the
// node. A source still stopping keeps its own reference until it ends.
func (n *Node) keepRegistries(sources []config.Source) {
	used := map[kafka.RegistryConfig]bool{}
	for _, s := range sources {
		if rc := s.Decoding.RegistryConfig(); rc != nil {
			used[*rc] = true
		}
	}
	n.regMu.Lock()
	defer n.regMu.Unlock()
	maps.DeleteFunc(n.registries, func(rc kafka.RegistryConfig, _ *decode.Registry) bool { return !used[rc] })
}

// Start opens everything the configuration names and starts the node. On
// error everything opened so far is closed again.
func Start(ctx context.Context, cfg *config.Config, opt Options) (*Node, error) {
	log := opt.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	pool := exec.NewPool(0)
	n := &Node{cfg: cfg, opt: opt, log: log, pool: pool, exec: &exec.Goroutines{Pool: pool}, sources: map[string]Source{}}
	n.ctl.init(cfg)
	if err := n.start(ctx, opt); err != nil {
		n.closeAll()
		return nil, err
	}
	return n, nil
}

func (n *Node) start(ctx context.Context, opt Options) (err error) {
	cfg, log := n.cfg, n.log

	n.store, err = stores.Open(ctx, cfg.Store.URL.Reveal(), stores.Options{
		Logger: log.With("component", "store"), Timeout: cfg.Store.Timeout, MaxConns: cfg.Store.MaxConns,
	})
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	specs := make([]actors.SourceSpec, 0, len(cfg.Sources))
	for i, s := range cfg.Sources {
		spec, src, err := n.openSource(ctx, i, s, opt)
		if err != nil {
			return err
		}
		n.sources[s.Name] = src
		specs = append(specs, spec)
	}

	n.events = events.New(cfg.Node.Name, clock.Real{}, events.DefaultCapacity)
	n.reg = prometheus.NewRegistry()
	n.metrics = metrics.New(n.reg, cfg.Node.Name, metrics.Options{PerUnit: cfg.Node.MetricsPerUnit, Now: clock.Real{}.Now})
	// Built before joining, so that unusable TLS files stop the node
	// before it is a member; it listens once the actors run.
	n.debug, err = debug.New(debug.Config{
		Addr: cfg.Node.DebugAddr, Token: cfg.Node.DebugToken.Reveal(), Node: n, Registry: n.reg,
		AdminToken: cfg.Node.AdminToken.Reveal(), Controller: n, Events: n.events,
		Logger: log.With("component", "debug"),
		// Only gossip encrypted with cluster.secret_key authenticates
		// its members: only then may the cluster view send them the token.
		MembersAuthenticated: len(cfg.Cluster.Key()) > 0,
		TLSCert:              cfg.Node.DebugTLS.Cert,
		TLSKey:               cfg.Node.DebugTLS.Key,
		TLSCA:                cfg.Node.DebugTLS.CA,
	})
	if err != nil {
		return fmt.Errorf("debug endpoint: %w", err)
	}

	tags := make([]placement.SourceTag, 0, len(specs)) // non-nil: "runs these", even none
	for _, sp := range specs {
		tags = append(tags, placement.SourceTag{ID: placement.SourceID(sp.Identity)})
	}
	sort.Slice(tags, func(i, j int) bool { return tags[i].ID < tags[j].ID })
	n.member, err = gossip.Join(ctx, gossip.Config{
		Name: cfg.Node.Name, Bind: cfg.Cluster.Bind, Advertise: cfg.Cluster.Advertise, Join: cfg.Cluster.Join,
		Profile: cfg.Cluster.Profile, SecretKey: cfg.Cluster.Key(), DebugAddr: cfg.Node.DebugAddr, DebugTLS: cfg.Node.DebugTLS.Cert != "",
		Version: opt.Version, Capacity: cfg.Node.Capacity, MaxCapacity: cfg.Cluster.MaxCapacity, Logger: log.With("component", "gossip"), Sources: tags,
	})
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	n.capWarn = mixedCapWarner{log: log, own: cfg.Cluster.MaxCapacity}
	watch := func() {
		ms := n.member.Members()
		n.metrics.SetMembers(len(ms))
		n.capWarn.observe(ms, time.Now())
	}
	watch()
	n.stopWatch = n.member.Watch(watch)

	env := actors.Env{
		Node:     cfg.Node.Name,
		Clock:    clock.Real{},
		Rand:     actors.NewRand(seed()),
		Executor: n.exec,
		// mailboxes run on the jobs' pool, not on a new goroutine each
		Dispatcher: exec.Dispatcher{Pool: n.pool},
		Membership: n.member,
		Store:      n.store,
		Logger:     log,
		Metrics:    n.metrics,
		Events:     n.events,
		Tuning:     tuning(opt.Tuning, cfg),
		ApplyAlone: !cfg.Node.GroupCommit,
		// the clamp of every member's gossiped capacity, unless a member
		// gossips a lower max_capacity
		MaxCapacity: cfg.Cluster.MaxCapacity,
	}
	n.tracing, err = tracing.Start(ctx, tracing.Options{Node: cfg.Node.Name, Version: opt.Version, Logger: log.With("component", "tracing")})
	if err != nil {
		return err
	}
	if n.tracing != nil {
		env.Tracer = n.tracing.Tracer()
		log.Info("tracing on: exporting spans over OTLP", "protocol", n.tracing.Protocol())
	}
	n.actors, err = actors.Start(env, specs)
	if err != nil {
		return err
	}

	if err := n.debug.Start(); err != nil {
		return fmt.Errorf("node.debug_addr: %w", err)
	}

	hctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	n.wg.Add(2)
	go n.watchStore(hctx)
	go n.pruneDedupe(hctx, cfg.Store.DedupeRetention)
	log.Info("node started", "node", cfg.Node.Name, "debug", n.debug.URL(),
		"gossip", cfg.Cluster.Bind, "sources", len(specs))
	return nil
}

func (n *Node) openSource(ctx context.Context, i int, s config.Source, opt Options) (actors.SourceSpec, Source, error) {
	field := fmt.Sprintf("sources[%d]", i)
	open := opt.OpenSource
	if open == nil {
		open = OpenSource
	}
	src, err := open(ctx, s, n.log.With("source", s.Name))
	if err != nil {
		return actors.SourceSpec{}, Source{}, fmt.Errorf("%s (%s): %w", field, s.Name, err)
	}
	spec := actors.SourceSpec{
		Name: s.Name, Type: s.Type, Stream: src.Stream, Queue: src.Queue, Slots: s.Slots, Start: s.StartMode(),
		OnPositionReset: resetPolicy(s.OnPositionReset), Identity: sourceIdentity(s), AckDeadline: ackDeadline(s),
		Table: s.Records.Table, KeyField: s.Records.Key, MaxMessageBytes: s.MaxMessageBytes, Schema: s.Records.Schema,
		BatchSize: s.BatchSize, MaxWait: s.MaxWait, MaxConsecutiveFailures: s.MaxConsecutiveFailures,
		LeaseTTL: s.LeaseTTL, Discovery: s.DiscoveryInterval,
		BatchBytes: s.BatchBytes, MaxDeadLetterBytes: s.DeadLetterMaxBytes,
		Format: decode.Format(s.Decoding.Format),
	}
	if s.Decoding.Registry != nil {
		if spec.Registry, err = n.registry(s.Decoding); err != nil {
			closeSource(src)
			return actors.SourceSpec{}, Source{}, fmt.Errorf("%s.decode: %w", field, err)
		}
	}
	if s.Mode == "handler" {
		h, ok := opt.Handlers[s.HandlerName]
		if !ok {
			closeSource(src)
			return actors.SourceSpec{}, Source{}, fmt.Errorf("%s.handler_name: no handler %q is registered", field, s.HandlerName)
		}
		spec.Handler = h
	}
	return spec, src, nil
}

// resetPolicy is on_position_reset as an actors.ResetPolicy (validated by
// config: earliest, latest or fail).
func resetPolicy(s string) actors.ResetPolicy {
	switch s {
	case "latest":
		return actors.ResetLatest
	case "fail":
		return actors.ResetFail
	}
	return actors.ResetEarliest
}

// sourceIdentity is what must be equal for two nodes to run the same
// source: its name, type and what it reads. It is gossiped as a hash, so
// that placement puts a unit only on members that run its source as this
// node does (a rolling change that points a source elsewhere makes it
// another source).
func sourceIdentity(s config.Source) string {
	id := s.Name + "/" + s.Type
	switch {
	case s.Kafka != nil:
		id += "/" + s.Kafka.Topic
	case s.Kinesis != nil:
		id += "/" + s.Kinesis.StreamName
	case s.SQS != nil:
		id += "/" + s.SQS.QueueURL
	case s.PubSub != nil:
		id += "/" + s.PubSub.Project + "/" + s.PubSub.Subscription
	case s.NATS != nil:
		id += "/" + s.NATS.Stream + "/" + s.NATS.Subject + "/" + s.NATS.Mode
	}
	return id
}

// ackDeadline is how long a queue's broker keeps a delivery invisible, as
// far as the configuration says (the unit extends it every third of it
// while a batch is in flight): SQS's visibility timeout, JetStream's
// AckWait (the server's default is 30 s); 0 for Pub/Sub, whose
// subscription's deadline is not configured here, lets the runtime use 10
// s, the shortest Pub/Sub allows.
func ackDeadline(s config.Source) time.Duration {
	switch {
	case s.SQS != nil && s.SQS.VisibilityTimeout > 0:
		return s.SQS.VisibilityTimeout
	case s.SQS != nil:
		return sqs.DefaultVisibilityTimeout // what the adapter asks for when 0
	case s.NATS != nil && s.NATS.AckWait > 0:
		return s.NATS.AckWait
	case s.NATS != nil:
		return 30 * time.Second
	}
	return 0
}

func seed() uint64 {
	var b [8]byte
	if _, err := crand.Read(b[:]); err != nil {
		return uint64(time.Now().UnixNano())
	}
	return binary.LittleEndian.Uint64(b[:])
}

// Tree is this node's actor tree (debug.Node), with the outcome of the
// last reload and whether the node is drained.
func (n *Node) Tree() actors.Tree {
	t := n.actors.Tree()
	n.ctl.annotate(&t)
	return t
}

// The debug history's background sample reads the counters, not the
// tree, of a CounterReader: a node that stopped being one would copy its
// whole tree every sample again, silently.
var _ debug.CounterReader = (*Node)(nil)

// Name is the node's name (debug.CounterReader).
func (n *Node) Name() string { return n.actors.Name() }

// Counters are the node's units' counters as its tree shows them
// (debug.CounterReader: the debug history's background sample).
func (n *Node) Counters(buf []actors.SourceCounters) []actors.SourceCounters {
	return n.actors.Counters(buf)
}

// Members is the membership view (debug.Node).
func (n *Node) Members() []placement.Member { return n.member.Members() }

// Audit reads the store's audit of controls (debug.AuditLister).
func (n *Node) Audit(ctx context.Context, f persistence.AuditFilter) ([]persistence.AuditEntry, error) {
	return n.store.ListAudit(ctx, f)
}

// Ready is nil when the store answered its last health check and the node
// is in the membership (debug.Node).
func (n *Node) Ready() error {
	n.mu.Lock()
	err := n.storeErr
	n.mu.Unlock()
	if err != nil {
		return fmt.Errorf("store unreachable: %w", err)
	}
	for _, m := range n.member.Members() {
		if m.Name == n.cfg.Node.Name {
			return nil
		}
	}
	return errors.New("not a member of the cluster")
}

// DebugAddr is the address the debug endpoint listens on.
func (n *Node) DebugAddr() string { return n.debug.Addr() }

// watchStore checks the store every 2 s for /readyz.
func (n *Node) watchStore(ctx context.Context) {
	defer n.wg.Done()
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		err := checkStore(ctx, n.store, 2*time.Second)
		if ctx.Err() != nil {
			return
		}
		n.mu.Lock()
		n.storeErr = err
		n.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// checkStore asks the store one cheap question, within timeout: whether
// it can read a checkpoint (one that does not exist is an answer too).
func checkStore(ctx context.Context, s persistence.Checkpoints, timeout time.Duration) error {
	c, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err := s.Checkpoint(c, "drover/health")
	if errors.Is(err, persistence.ErrNotFound) {
		return nil
	}
	return err
}

// pruneDedupe forgets queue message ids older than the retention, hourly.
func (n *Node) pruneDedupe(ctx context.Context, retention time.Duration) {
	defer n.wg.Done()
	if retention <= 0 {
		retention = 7 * 24 * time.Hour
	}
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			pruneOnce(ctx, n.store, time.Now().Add(-retention), n.log)
		}
	}
}

// pruneOnce forgets the queue message ids applied before, within a minute,
// and logs the outcome.
func pruneOnce(ctx context.Context, s persistence.Dedupe, before time.Time, log *slog.Logger) {
	c, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	k, err := s.PruneDedupe(c, before)
	if err != nil {
		log.Warn("prune dedupe table", "error", err)
	} else if k > 0 {
		log.Info("pruned dedupe table", "ids", k)
	}
}

// Shutdown leaves the cluster gracefully: it announces "leaving" so the
// others stop placing units here and will not wait for lease expiry, lets
// every unit finish its batch, checkpoint and release its lease, leaves
// memberlist and closes everything. When ctx ends first it stops at once.
func (n *Node) Shutdown(ctx context.Context) error {
	start := time.Now()
	n.ctl.stopped()
	n.log.Info("leaving the cluster")
	if err := n.member.SetState(ctx, placement.StateLeaving); err != nil {
		n.log.Warn("announce leaving", "error", err)
	}
	var err error
	select {
	case <-n.actors.Drain():
		n.log.Info("units handed over", "took", time.Since(start).Round(time.Millisecond))
	case <-ctx.Done():
		err = fmt.Errorf("graceful stop cut short: %w", ctx.Err())
		n.log.Warn("graceful stop cut short; leases will be taken over", "error", ctx.Err())
	}
	n.closeAll()
	return err
}

// Close stops at once, without handing units over.
func (n *Node) Close() { n.closeAll() }

// closeAll stops everything Start started, whatever got started: it is
// also Start's clean-up when a later step fails.
func (n *Node) closeAll() {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	n.closed = true
	n.mu.Unlock()
	n.ctl.stopped()
	if n.stopWatch != nil {
		n.stopWatch()
	}
	if n.member != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if err := n.member.Leave(ctx); err != nil {
			n.log.Warn("leave memberlist", "error", err)
		}
		cancel()
	}
	if n.debug != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = n.debug.Shutdown(ctx)
		cancel()
	}
	if n.actors != nil {
		n.actors.Close()
	}
	if n.cancel != nil {
		n.cancel()
	}
	n.mu.Lock()
	srcs := n.sources
	n.sources = nil
	n.mu.Unlock()
	for _, s := range srcs {
		closeSource(s) // cancels broker calls still in flight
	}
	n.exec.Wait()
	n.pool.Close() // its idle goroutines exit; a mailbox run after this gets one of its own
	n.wg.Wait()
	n.ctl.finishers.Wait() // they end on the node's stop (ctl.stop)
	if n.tracing != nil {  // after the actors: their last spans are queued
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := n.tracing.Shutdown(ctx); err != nil {
			n.log.Warn("flush traces", "error", err)
		}
		cancel()
	}
	if n.store != nil {
		if err := n.store.Close(); err != nil {
			n.log.Warn("close store", "error", err)
		}
	}
}

func closeSource(s Source) {
	if s.Stream != nil {
		_ = s.Stream.Close()
	}
	if s.Queue != nil {
		_ = s.Queue.Close()
	}
}

// tuning is t with what the configuration sets: node.seek_expiry, unless
// the caller set it (tests).
func tuning(t actors.Tuning, cfg *config.Config) actors.Tuning {
	if t.SeekExpiry == 0 {
		t.SeekExpiry = cfg.Node.SeekExpiry
	}
	if t.SeekExpiry <= 0 {
		t.SeekExpiry = actors.DefaultSeekExpiry
	}
	return t
}
