package testkit

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"hash/fnv"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/actors/events"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/memory"
	"github.com/drover-dev/drover/persistence"
	memstore "github.com/drover-dev/drover/persistence/memory"
)

// Config describes a simulated cluster.
type Config struct {
	// Seed decides every choice of the run: task order, latencies, jitter.
	Seed uint64
	// Nodes is how many nodes start (default 3), named node-1, node-2, ...
	Nodes int
	// Detection is the failure-detection delay of simulated membership
	// (default 1 s, about memberlist's fast profile).
	Detection time.Duration
	// Join gives a node's join list (seeds, by node name) from its name and
	// all node names; nil: every other node. SetJoin overrides it.
	Join func(node string, all []string) []string
	// HealEvery is how often a node retries its join list and the members
	// it saw die (default 2 s, with seeded jitter); HealMemory how long it
	// retries a dead member (default 10 min). See membership.go.
	HealEvery, HealMemory time.Duration
	// NoHealing switches the healing loop off: a mutation switch, to show
	// that split memberships then never merge.
	NoHealing bool
	// MinLatency and MaxLatency bound each broker or store call (default
	// 1 ms to 5 ms).
	MinLatency, MaxLatency time.Duration
	// Store, when set, is the store under test (it must take its time from
	// Clock()); by default an in-memory store on the virtual clock.
	Store func(clock *Clock) (persistence.Store, error)
	// Tuning is passed to every node.
	Tuning actors.Tuning
	// ApplyAlone switches group commit off on every node
	// (node.group_commit: false): each batch is a store call of its own.
	ApplyAlone bool
	// ParallelGroups is how many groups of batches a node keeps in the
	// store at once with group commit (persistence.ParallelGroups; default
	// 1, as SQLite; PostgreSQL says its pool size).
	ParallelGroups int
	// FailoverBound, when set, makes Report flag every unit of a node
	// killed while the cluster was otherwise healthy that was not owned
	// again within it.
	FailoverBound time.Duration
	// Logger receives the nodes' logs; nil discards.
	Logger *slog.Logger
	// TraceTo, when set, receives every line hashed into the digest (to
	// find where two runs part).
	TraceTo io.Writer
	// StoreTimeout is how long a store call waits for a row lock (LockUnit)
	// before it fails, as store.timeout bounds it in production (default
	// 2 s).
	StoreTimeout time.Duration
	// RecreateQuiet is how long after RecreateStream the ledger still
	// counts a unit's commits as of the old stream when the unit has not
	// reset its checkpoint yet (default 8 s); publish to a recreated stream
	// only after it.
	RecreateQuiet time.Duration
	// ClockAhead is how far a node's clock (Env.Clock's Now) runs ahead of
	// the virtual clock, which the store keeps, by node name: a node whose
	// clock is wrong. Its timers still fire after their virtual durations.
	ClockAhead map[string]time.Duration
}

// Clock is the simulation's virtual clock, for stores and brokers created
// outside the testkit.
type Clock = vclock

// Cluster is a whole drover cluster in one process, on one goroutine, in
// virtual time. It is not safe for concurrent use: drive it from one
// goroutine (a test).
type Cluster struct {
	cfg     Config
	s       *scheduler
	w       *world
	clock   *vclock
	inner   persistence.Store
	mem     *memstore.Store // nil unless the store is the default memory store
	store   *auditStore
	led     *ledger
	digest  hash.Hash
	events  int
	groups  int // ApplyGroup calls (group commit)
	log     []Event
	scripts int // scenario steps (At) not run yet

	specs   []actors.SourceSpec
	streams map[string]*memory.Stream
	queues  map[string]*memory.Queue
	nodes   map[string]*simNode
	order   []string
	joins   map[string][]string // join lists set by SetJoin
	nextSID int
	started bool

	// disturbed counts faults in force; a kill while it is zero is clean.
	disturbed map[string]bool
	// lastDisturb is when the last fault ended or the last node event
	// (kill, stop, restart) happened: the cluster is quiet after it.
	lastDisturb time.Time

	spans     []span               // every fault and node event, for quietDuring
	units     map[string]*unitInfo // stream units that exist, for the ownership check
	open      map[string][]string  // stream source -> partitions that take messages
	forgotten map[string]bool      // units whose partition the stream forgot
	cut       map[string]bool      // nodes cut off from the store
	checks    []Violation          // broken invariants found while running
	unowned   map[string]time.Time // unit -> since when nobody owns it (quiet cluster)
	ghosts    map[string]bool      // node|unit the tree invariant reported, while it stays
	treeUnits map[string]int       // scratch of the tree invariant's fast path
	scale     *scaleStats          // the scale mode's counters (scale.go); nil otherwise

	pauses       []pauseSpan              // every pause (Control), for the pause invariant
	ackDeadline  map[string]time.Duration // queue source -> its ack deadline
	expiriesSeen map[string]int           // queue source -> expiries checked
}

type simNode struct {
	name    string
	sid     int
	node    *actors.Node
	member  *simMembership
	state   string       // new, running, stopping, stopped, killed
	sources []string     // the sources its next start runs; nil: all
	running []string     // the sources its current process runs; nil: all
	stopAt  time.Time    // when its graceful stop began
	drained *actors.Node // the process Drain took out of placement; nil when none (drain.go)
	// removing are the answers of the source removals Reload asked of
	// the process removingOf, by source, until they came (drain.go)
	removing   map[string]<-chan error
	removingOf *actors.Node
	metrics    *stateMetrics // the current process's unit states, as its metrics report them
	events     *events.Log   // the current process's event log
	// clean is what the tree invariant last found clean: the process, its
	// tree's and its metrics' versions of the states (checkTrees).
	clean treeVersion
}

// New builds a cluster; add sources, then Start it.
func New(cfg Config) (*Cluster, error) {
	if cfg.Nodes <= 0 {
		cfg.Nodes = 3
	}
	if cfg.Detection <= 0 {
		cfg.Detection = time.Second
	}
	if cfg.MinLatency <= 0 {
		cfg.MinLatency = time.Millisecond
	}
	if cfg.StoreTimeout <= 0 {
		cfg.StoreTimeout = 2 * time.Second
	}
	if cfg.RecreateQuiet <= 0 {
		cfg.RecreateQuiet = 8 * time.Second
	}
	if cfg.MaxLatency < cfg.MinLatency {
		cfg.MaxLatency = 5 * time.Millisecond
		if cfg.MaxLatency < cfg.MinLatency {
			cfg.MaxLatency = cfg.MinLatency
		}
	}
	s := newScheduler(cfg.Seed)
	c := &Cluster{
		cfg: cfg, s: s, clock: &vclock{s: s, node: -1},
		w:   newWorld(s, worldConfig{seed: cfg.Seed, detection: cfg.Detection, healEvery: cfg.HealEvery, memory: cfg.HealMemory, noHealing: cfg.NoHealing}),
		led: newLedger(), digest: sha256.New(), streams: map[string]*memory.Stream{},
		queues: map[string]*memory.Queue{}, nodes: map[string]*simNode{}, disturbed: map[string]bool{},
		units: map[string]*unitInfo{}, open: map[string][]string{}, forgotten: map[string]bool{}, cut: map[string]bool{},
		unowned: map[string]time.Time{}, ghosts: map[string]bool{}, ackDeadline: map[string]time.Duration{}, expiriesSeen: map[string]int{},
		joins: map[string][]string{},
	}
	c.w.event = func(kind, node, detail string) { c.event(kind, node, "", detail) }
	if cfg.TraceTo != nil {
		c.digest = teeHash{c.digest, cfg.TraceTo}
	}
	s.instantDone = c.checkTrees
	s.trace = func(node int, label string) {
		if label != "probe" {
			fmt.Fprintf(c.digest, "%d %d %s\n", s.now.UnixNano(), node, label)
		}
	}
	var err error
	if cfg.Store != nil {
		c.inner, err = cfg.Store(c.clock)
		if err != nil {
			return nil, fmt.Errorf("testkit: open store: %w", err)
		}
	} else {
		c.mem = memstore.New(memstore.Config{Clock: c.clock})
		c.inner = c.mem
	}
	c.store = &auditStore{Store: c.inner, c: c, failNext: map[string]int{}, locks: map[string]time.Time{},
		raced: map[string]bool{}, split: map[string]bool{}}
	for i := 1; i <= cfg.Nodes; i++ {
		name := "node-" + strconv.Itoa(i)
		c.nodes[name] = &simNode{name: name, state: "new"}
		c.order = append(c.order, name)
	}
	return c, nil
}

// Clock returns the virtual clock (for brokers and stores made outside).
func (c *Cluster) Clock() *Clock { return c.clock }

// Now is the virtual time.
func (c *Cluster) Now() time.Time { return c.s.now }

// Store is the store under test (without the testkit's audit wrapper).
func (c *Cluster) Store() persistence.Store { return c.inner }

// MemoryStore is the default in-memory store, nil when Config.Store is set.
func (c *Cluster) MemoryStore() *memstore.Store { return c.mem }

// StoreFaults injects store failures, whatever the store.
func (c *Cluster) StoreFaults() StoreFaults { return StoreFaults{c.store} }

// Nodes lists the node names.
func (c *Cluster) Nodes() []string { return append([]string(nil), c.order...) }

// AddStream adds a stream source on an in-memory stream with n partitions.
// spec.Stream is set by the testkit.
func (c *Cluster) AddStream(spec actors.SourceSpec, partitions int) (*memory.Stream, error) {
	st, err := memory.NewStream(memory.StreamConfig{Partitions: partitions, Clock: c.clock})
	if err != nil {
		return nil, err
	}
	spec.Stream, spec.Queue = st, nil
	c.specs = append(c.specs, spec)
	c.streams[spec.Name] = st
	if spec.Start == brokers.Latest {
		c.led.latest[spec.Name] = true
	}
	for i := range partitions {
		id := strconv.Itoa(i)
		c.open[spec.Name] = append(c.open[spec.Name], id)
		c.units[spec.Name+"/"+id] = &unitInfo{source: spec.Name}
	}
	return st, nil
}

// AddQueue adds a queue source on an in-memory queue.
func (c *Cluster) AddQueue(spec actors.SourceSpec, ackDeadline time.Duration) (*memory.Queue, error) {
	q, err := memory.NewQueue(memory.QueueConfig{AckDeadline: ackDeadline, Clock: c.clock})
	if err != nil {
		return nil, err
	}
	if spec.AckDeadline <= 0 {
		spec.AckDeadline = ackDeadline
	}
	spec.Queue, spec.Stream = q, nil
	c.specs = append(c.specs, spec)
	c.queues[spec.Name] = q
	c.ackDeadline[spec.Name] = ackDeadline
	return q, nil
}

// Stream and Queue return a source's in-memory broker (for fault injection).
func (c *Cluster) Stream(source string) *memory.Stream { return c.streams[source] }
func (c *Cluster) Queue(source string) *memory.Queue   { return c.queues[source] }

// Start starts every node.
func (c *Cluster) Start() error {
	if c.started {
		return errors.New("testkit: already started")
	}
	c.started = true
	for u := range c.units {
		c.led.initial[u] = true // the units of the sources' first discovery
	}
	c.startChecks()
	// everyone joins first, as processes started together would find each
	// other before owning anything
	for _, name := range c.order {
		c.joinNode(c.nodes[name])
	}
	c.w.settleGossip()
	for _, name := range c.order {
		if err := c.startNode(c.nodes[name]); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) joinNode(n *simNode) {
	c.nextSID++
	n.sid = c.nextSID
	c.s.revive(n.sid)
	n.member = c.w.join(n.name, n.sid, c.joinList(n.name))
}

func (c *Cluster) joinList(name string) []string {
	if seeds, ok := c.joins[name]; ok {
		return seeds
	}
	if c.cfg.Join != nil {
		return c.cfg.Join(name, c.Nodes())
	}
	var out []string
	for _, o := range c.order {
		if o != name {
			out = append(out, o)
		}
	}
	return out
}

// SetJoin sets the join list of node (seeds, by node name; empty: it joins
// no one), used from its next start or restart on: the process contacts
// each seed that runs and that it can reach, and forms a cluster of its own
// when none does. Healing retries the list on a timer.
func (c *Cluster) SetJoin(node string, seeds []string) error {
	if _, err := c.node(node); err != nil {
		return err
	}
	for _, s := range seeds {
		if _, err := c.node(s); err != nil {
			return fmt.Errorf("testkit: join list of %s: %w", node, err)
		}
	}
	c.joins[node] = append([]string{}, seeds...)
	return nil
}

// Converged reports whether membership has converged: every running node
// that is not paused sees exactly the running nodes (processes up, not
// left), each in its current process.
func (c *Cluster) Converged() bool { return c.w.converged() }

// ConvergeBound is how soon membership converges once faults have ended
// (every running node can reach every other and none is paused), provided
// the join lists connect the nodes: the longest heal interval plus the
// detection delay plus two probe intervals. Without healing (NoHealing)
// views need not converge at all.
func (c *Cluster) ConvergeBound() time.Duration { return c.w.bound() }

// Views returns every running node's membership view, for diagnostics: the
// members it sees as "name#process", sorted (the process number changes at
// every restart).
func (c *Cluster) Views() map[string][]string { return c.w.views() }

func (c *Cluster) startNode(n *simNode) error {
	if n.member == nil || n.state != "new" {
		c.joinNode(n)
	}
	h := fnv.New64a()
	h.Write([]byte(n.name))
	specs := c.specs
	n.running = nil
	if n.sources != nil {
		specs = nil
		for _, sp := range c.specs {
			if slices.Contains(n.sources, sp.Name) {
				specs = append(specs, sp)
			}
		}
		n.running = slices.Clone(n.sources)
	}
	env := actors.Env{
		Node:       n.name,
		Clock:      &vclock{s: c.s, node: n.sid, ahead: c.cfg.ClockAhead[n.name]},
		Rand:       actors.NewRand(c.cfg.Seed ^ h.Sum64() ^ uint64(n.sid)),
		Dispatcher: &dispatcher{s: c.s, node: n.sid},
		Executor:   &executor{s: c.s, node: n.sid, minLatency: c.cfg.MinLatency, maxLatency: c.cfg.MaxLatency},
		Membership: n.member,
		Store:      nodeStore{auditStore: c.store, node: n.name},
		Logger:     c.cfg.Logger,
		Trace:      func(e actors.Event) { c.event(e.Kind, e.Node, e.Unit, e.Detail) },
		Tuning:     c.cfg.Tuning,
		ApplyAlone: c.cfg.ApplyAlone,
	}
	n.metrics = newStateMetrics()
	env.Metrics = n.metrics
	n.events = events.New(n.name, env.Clock, 0)
	env.Events = n.events
	if c.scale != nil {
		env.Placement = c.scale.placement(n.name)
		c.scale.viewChanged(n.name) // a new process: its first view
	}
	node, err := actors.Start(env, specs)
	if err != nil {
		return fmt.Errorf("testkit: start %s: %w", n.name, err)
	}
	n.node, n.state = node, "running"
	c.event("node-start", n.name, "", strconv.Itoa(n.sid))
	return nil
}

func (c *Cluster) event(kind, node, unit, detail string) {
	c.events++
	if kind != "commit" && kind != "publish" && kind != "applied" {
		c.log = append(c.log, Event{Time: c.s.now, Kind: kind, Node: node, Unit: unit, Detail: detail})
	}
	fmt.Fprintf(c.digest, "%d %s %s %s %s\n", c.s.now.UnixNano(), kind, node, unit, detail)
}

// Digest is a hash of the full event trace so far: every task run, actor
// event and commit, with its virtual time. Same seed, same scenario, same
// digest.
func (c *Cluster) Digest() string {
	sum := c.digest.(interface{ Sum([]byte) []byte }).Sum(nil)
	return hex.EncodeToString(sum[:8])
}

// Events counts the events in the trace so far.
func (c *Cluster) Events() int { return c.events }

// Groups counts the store calls that applied a group of batches
// (persistence.GroupApplier: group commit) so far.
func (c *Cluster) Groups() int { return c.groups }

// Steps counts the tasks run so far (mailbox runs, jobs, timers, probes).
func (c *Cluster) Steps() uint64 { return c.s.steps }

// Event is one notable thing in a run: a node or unit event (acquired,
// lease-lost, failed, restarted, finished, ...), a scenario step (kill,
// pause, ...) or a broken invariant. Commits are counted, not listed.
type Event struct {
	Time   time.Time
	Kind   string
	Node   string
	Unit   string
	Detail string
}

// Log returns the notable events so far, in order; kind filters ("" all).
func (c *Cluster) Log(kind string) []Event {
	var out []Event
	for _, e := range c.log {
		if kind == "" || e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// Run advances virtual time by d, running everything due.
func (c *Cluster) Run(d time.Duration) { c.s.runUntil(c.s.now.Add(d)) }

// RunUntil runs until cond holds (checked after every task) or limit of
// virtual time has passed; it reports whether cond held.
func (c *Cluster) RunUntil(cond func() bool, limit time.Duration) bool {
	end := c.s.now.Add(limit)
	for {
		if cond() {
			return true
		}
		if !c.s.step(end) {
			if c.s.now.Before(end) {
				c.s.now = end
			}
			return cond()
		}
	}
}

// At runs fn at virtual time now+d, as part of the simulation (a scripted
// scenario step: publish, kill, ...).
func (c *Cluster) At(d time.Duration, fn func()) {
	c.scripts++
	c.s.after(-1, d, "script", func() { c.scripts--; fn() })
}

// expectStream records the messages published to partition of stream
// source at positions pos as expected, and returns their unit.
func (c *Cluster) expectStream(source, partition string, pos []string) string {
	unit := source + "/" + partition
	gen := c.led.gen[source]
	for _, p := range pos {
		c.led.expect(streamKey(unit, gen, p), produced{source: source, unit: unit, position: p, gen: gen})
		c.led.lastPublished[unit] = p
	}
	return unit
}

// Publish adds messages to a source: to partition of a stream, or to a
// queue (partition ignored). It returns their positions (queues: ids) and
// records them as expected.
func (c *Cluster) Publish(source, partition string, msgs ...brokers.Message) ([]string, error) {
	if st, ok := c.streams[source]; ok {
		pos, err := st.Produce(partition, msgs...)
		if err != nil {
			return nil, err
		}
		unit := c.expectStream(source, partition, pos)
		c.event("publish", "", unit, strconv.Itoa(len(pos)))
		return pos, nil
	}
	if q, ok := c.queues[source]; ok {
		ids := q.Send(msgs...)
		gen := c.led.gen[source]
		if c.led.queueGen[source] == nil {
			c.led.queueGen[source] = map[string]int{}
		}
		for _, id := range ids {
			c.led.queueGen[source][id] = gen
			c.led.expect(queueKey(source, gen, id), produced{source: source, position: id, gen: gen})
		}
		c.event("publish", "", source, strconv.Itoa(len(ids)))
		return ids, nil
	}
	return nil, fmt.Errorf("testkit: no source %q", source)
}

// PublishAggregate adds msgs to partition of stream source as one
// KPL-style aggregate (memory.Stream.ProduceAggregate): they are read at
// sub-positions "<offset>/<index>" and recorded as expected each.
func (c *Cluster) PublishAggregate(source, partition string, msgs ...brokers.Message) ([]string, error) {
	st, ok := c.streams[source]
	if !ok {
		return nil, fmt.Errorf("testkit: no stream %q", source)
	}
	pos, err := st.ProduceAggregate(partition, msgs...)
	if err != nil {
		return nil, err
	}
	unit := c.expectStream(source, partition, pos)
	c.event("publish", "", unit, strconv.Itoa(len(pos))+" aggregated")
	return pos, nil
}

func (c *Cluster) node(name string) (*simNode, error) {
	n, ok := c.nodes[name]
	if !ok {
		return nil, fmt.Errorf("testkit: no node %q", name)
	}
	return n, nil
}

// Tree is a node's actor tree.
func (c *Cluster) Tree(name string) (actors.Tree, error) {
	n, err := c.node(name)
	if err != nil {
		return actors.Tree{}, err
	}
	if n.node == nil || n.state == "killed" || n.state == "stopped" {
		return actors.Tree{}, fmt.Errorf("testkit: %s is %s", name, n.state)
	}
	return n.node.Tree(), nil
}

// Owners returns, for each unit with a live child anywhere, the nodes that
// list it in their tree (normally exactly one after convergence).
func (c *Cluster) Owners() map[string][]string {
	out := map[string][]string{}
	for _, name := range c.Running() {
		t := c.nodes[name].node.Tree()
		for _, s := range t.Sources {
			for _, u := range s.Units {
				out[u.Unit] = append(out[u.Unit], name)
			}
		}
	}
	for _, v := range out {
		sort.Strings(v)
	}
	return out
}

// Close stops every node's actors. The cluster cannot run after Close.
func (c *Cluster) Close() {
	for _, name := range c.order {
		n := c.nodes[name]
		if n.node != nil && n.state != "killed" && n.state != "stopped" {
			n.node.Close()
		}
		if n.sid > 0 {
			c.s.kill(n.sid)
		}
	}
	for _, st := range c.streams {
		_ = st.Close()
	}
	for _, q := range c.queues {
		_ = q.Close()
	}
}

// teeHash hashes and copies.
type teeHash struct {
	hash.Hash
	w io.Writer
}

func (t teeHash) Write(p []byte) (int, error) {
	_, _ = t.w.Write(p)
	return t.Hash.Write(p)
}

// EventLog is the event log of node's current process (what its GET
// /debug/events would answer); nil for a node that never started.
func (c *Cluster) EventLog(node string) *events.Log {
	if n := c.nodes[node]; n != nil {
		return n.events
	}
	return nil
}
