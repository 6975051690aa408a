package testkit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/memory"
	"github.com/drover-dev/drover/internal/exec"
	"github.com/drover-dev/drover/internal/mutate"
	"github.com/drover-dev/drover/persistence"
)

// Faults beyond kills, pauses and partitions: what the broker and the
// store can do to a running cluster. Each records what it makes
// legitimate in the ledger (messages the broker lost, a reset it forces),
// so that Report still holds every other message to "applied once".

// SetSources sets the sources node runs from its next start on (a rolling
// configuration change: restart it to apply). nil means every source.
func (c *Cluster) SetSources(node string, sources []string) error {
	n, err := c.node(node)
	if err != nil {
		return err
	}
	for _, s := range sources {
		if c.specByName(s) == nil {
			return fmt.Errorf("testkit: no source %q", s)
		}
	}
	n.sources = slices.Clone(sources)
	return nil
}

// runs reports whether node runs source (in its current process).
func (c *Cluster) runs(n *simNode, source string) bool {
	return n.running == nil || slices.Contains(n.running, source)
}

// stream is the stream of a stream source.
func (c *Cluster) stream(source string) (*memory.Stream, error) {
	st, ok := c.streams[source]
	if !ok {
		return nil, fmt.Errorf("testkit: no stream %q", source)
	}
	return st, nil
}

// AddPartitions adds n partitions to a stream source, as a Kafka topic
// grows. They appear after the source's first discovery, so they are read
// from their earliest whatever the source's start says.
func (c *Cluster) AddPartitions(source string, n int) ([]string, error) {
	st, err := c.stream(source)
	if err != nil {
		return nil, err
	}
	ids, err := st.AddPartitions(n)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		c.units[source+"/"+id] = &unitInfo{source: source, since: c.s.now}
		c.led.newUnit(source + "/" + id)
	}
	c.open[source] = append(c.open[source], ids...)
	c.event("add-partitions", "", source, fmt.Sprint(ids))
	return ids, nil
}

// Split splits a partition of a stream source into two children, as a
// Kinesis shard split does.
func (c *Cluster) Split(source, partition string) ([]string, error) {
	st, err := c.stream(source)
	if err != nil {
		return nil, err
	}
	kids, err := st.Split(partition)
	if err != nil {
		return nil, err
	}
	parent := source + "/" + partition
	for _, id := range kids {
		c.units[source+"/"+id] = &unitInfo{source: source, since: c.s.now, parents: []string{parent}}
		c.led.newUnit(source + "/" + id)
	}
	rest := c.open[source][:0:0]
	for _, o := range c.open[source] {
		if o != partition {
			rest = append(rest, o)
		}
	}
	c.open[source] = append(rest, kids...)
	c.event("split", "", parent, fmt.Sprint(kids))
	return kids, nil
}

// Forget makes a closed (split) partition disappear from the stream's
// listing, with its messages, as a Kinesis shard past retention does. What
// was not applied of it is lost upstream, and not counted as lost.
func (c *Cluster) Forget(source, partition string) error {
	st, err := c.stream(source)
	if err != nil {
		return err
	}
	if err := st.Forget(partition); err != nil {
		return err
	}
	unit := source + "/" + partition
	c.led.excuseUnit(unit, c.led.gen[source])
	delete(c.units, unit)
	c.forgotten[unit] = true
	for i := range c.led.kills {
		delete(c.led.kills[i].units, unit) // nobody owns a forgotten partition again
	}
	c.event("forget", "", unit, "")
	return nil
}

// RecreateStream deletes a stream source's stream and creates it again
// with as many partitions, offsets from 0 (position reuse). Messages not
// applied before are lost upstream; units must reset their checkpoints
// (on_position_reset) and read the new stream from its start.
//
// The new stream's positions repeat the old ones; the memory stream names
// each incarnation (brokers.StreamIdentifier, as Kafka's topic IDs do), so
// a unit that opens it after the recreation, even once it has grown past
// the unit's checkpoint, refuses the checkpoint recorded against the old
// one and resets (Report counts a new message at or below an old
// checkpoint that nobody reset as lost). A stream that names no
// incarnation could not tell: AwaitingReset says when publishing to such
// a stream is safe.
func (c *Cluster) RecreateStream(source string) error {
	st, err := c.stream(source)
	if err != nil {
		return err
	}
	if err := st.Recreate(); err != nil {
		return err
	}
	l := c.led
	for u, info := range c.units {
		if info.source == source {
			l.excuseUnit(u, l.gen[source])
			delete(c.units, u)
			// its id may come back (a later split or added partition): its
			// checkpoint is then of the old stream
			l.recreated[u] = c.s.now
			l.allowReset[u] = 1
			l.resetsAt[u] = l.resets[u]
		}
	}
	l.gen[source]++
	n := len(c.open[source])
	c.open[source] = nil
	for i := range n {
		id := strconv.Itoa(i)
		u := source + "/" + id
		c.open[source] = append(c.open[source], id)
		c.units[u] = &unitInfo{source: source, since: c.s.now}
		l.recreated[u] = c.s.now
		l.allowReset[u] = 1
		l.resetsAt[u] = l.resets[u]
		delete(l.lastPublished, u)
	}
	c.disturbUntil("recreate:"+source, c.s.now.Add(c.cfg.RecreateQuiet))
	c.event("recreate", "", source, strconv.Itoa(n))
	return nil
}

// AwaitingReset reports whether a unit of a recreated stream source still
// holds a checkpoint of the old stream that no reader judged since (it
// neither reset it nor opened the new partition), or the recreation is
// more recent than RecreateQuiet. Until then a message
// published to the new stream could land at or below an old checkpoint,
// where no broker with offset positions can tell it from an old one:
// publish only when this is false.
func (c *Cluster) AwaitingReset(source string) bool {
	for u, since := range c.led.recreated {
		if _, listed := c.units[u]; !listed || sourceOf(u) != source {
			continue // not a partition of the new stream: it reads nothing
		}
		if c.s.now.Before(since.Add(c.cfg.RecreateQuiet)) {
			return true
		}
		cp, err := c.inner.Checkpoint(context.Background(), u)
		if err != nil || cp.Finished || brokers.IsMarker(cp.Position) || c.led.resets[u] > c.led.resetsAt[u] {
			continue // nothing of the old stream, or reset already
		}
		if c.streams[source].OpenedAt(u[len(source)+1:]).After(since) {
			// a reader opened it after the recreation, while nothing was
			// published to it: the open judged the old checkpoint against
			// an empty partition, which no old position fits
			continue
		}
		return true
	}
	return false
}

// OpenPartitions lists a stream source's partitions that take messages
// (not split), as the testkit tracked them.
func (c *Cluster) OpenPartitions(source string) []string {
	return slices.Clone(c.open[source])
}

// RecreateQueue deletes a queue source's queue and creates it again: the
// messages in it are lost upstream. Message ids are never reused.
func (c *Cluster) RecreateQueue(source string) error {
	q, ok := c.queues[source]
	if !ok {
		return fmt.Errorf("testkit: no queue %q", source)
	}
	if err := q.Recreate(); err != nil {
		return err
	}
	c.led.excuseQueue(source, c.led.gen[source])
	c.led.gen[source]++
	c.event("recreate", "", source, "")
	return nil
}

// PublishTx writes msgs to a stream partition in a transaction that
// commits (or aborts) after d. Until then readers stop at its first
// message; an aborted transaction's messages must never be applied.
func (c *Cluster) PublishTx(source, partition string, commit bool, d time.Duration, msgs ...brokers.Message) ([]string, error) {
	st, err := c.stream(source)
	if err != nil {
		return nil, err
	}
	tx, err := st.BeginTx(partition)
	if err != nil {
		return nil, err
	}
	pos, err := tx.Produce(msgs...)
	if err != nil {
		_ = tx.Abort()
		return nil, err
	}
	unit := c.expectStream(source, partition, pos)
	gen := c.led.gen[source] // the generation the messages were published in
	c.event("publish-tx", "", unit, fmt.Sprintf("n=%d commit=%v", len(pos), commit))
	c.At(d, func() {
		if commit {
			if tx.Commit() == nil {
				c.event("tx-commit", "", unit, strconv.Itoa(len(pos)))
				return
			}
			// a reshard or a recreation aborted it meanwhile
		} else {
			_ = tx.Abort() // an error: a reshard or a recreation aborted it already
		}
		for _, p := range pos {
			k := streamKey(unit, gen, p)
			c.led.aborted[k] = true
			c.led.excuse(k)
		}
		c.event("tx-abort", "", unit, strconv.Itoa(len(pos)))
	})
	return pos, nil
}

// DropAcks makes the next n acks of a queue source vanish on their way (the
// broker never hears them): the messages come back after their deadline,
// which is not a deadline the unit failed to extend.
func (c *Cluster) DropAcks(source string, n int) error {
	q, ok := c.queues[source]
	if !ok {
		return fmt.Errorf("testkit: no queue %q", source)
	}
	q.DropAcks(n)
	c.disturbUntil("drop-acks:"+source, c.s.now.Add(30*time.Second+2*c.ackDeadline[source]))
	return nil
}

// FailSporadically makes one fetch of a stream source fail every
// interval, count times: failures always separated by successful
// fetches, which must never fail a unit to its supervisor.
func (c *Cluster) FailSporadically(source string, interval time.Duration, count int) error {
	st, err := c.stream(source)
	if err != nil {
		return err
	}
	for i := range count {
		c.At(time.Duration(i)*interval, func() {
			st.FailNext(memory.OpFetch, 1, &brokers.Error{Op: memory.OpFetch, Retryable: true, Err: errors.New(sporadicMark)})
		})
	}
	return nil
}

// CutStore cuts node off from the store (every call of it fails) until
// RestoreStore, as a network fault between one node and the database.
func (c *Cluster) CutStore(node string) error {
	if _, err := c.node(node); err != nil {
		return err
	}
	c.cut[node] = true
	c.disturb("store-cut:" + node)
	c.event("store-cut", node, "", "")
	return nil
}

// RestoreStore ends CutStore.
func (c *Cluster) RestoreStore(node string) {
	delete(c.cut, node)
	c.Undisturb("store-cut:" + node)
	c.event("store-restore", node, "", "")
}

// LockUnit holds the row lock of unit's lease for d, as a transaction
// whose node vanished mid-apply does until the database cuts it off
// (idle_in_transaction_session_timeout). Meanwhile calls that need the
// row (acquire, apply, release, renew of that one lease) wait up to
// Config.StoreTimeout for it and then fail with a lock timeout; a
// renewal of all of a node's leases skips the locked row. A kill of the
// unit's holder within the failover bound is held to d + the bound.
func (c *Cluster) LockUnit(unit string, d time.Duration) {
	until := c.s.now.Add(d)
	c.store.locks[unit] = until
	if mutate.On(mutate.NoStoreDeadline) {
		// the bug of issue 9 item 7: nothing cuts the orphan off, though
		// the failover is still held to d
		c.store.locks[unit] = c.s.now.Add(time.Hour)
	}
	for i := range c.led.kills {
		if k := &c.led.kills[i]; k.units[unit] && c.s.now.Sub(k.at) <= c.cfg.FailoverBound {
			if k.orphaned == nil {
				k.orphaned = map[string]time.Time{}
			}
			k.orphaned[unit] = until
		}
	}
	// a disturbance that does not exempt the kill: its bound grows instead
	what := "lock:" + unit
	c.disturbed[what] = true
	c.spans = append(c.spans, span{what: what, from: c.s.now})
	c.s.at(-1, until, "undisturb", func() { c.Undisturb(what) })
	c.event("lock", "", unit, d.String())
}

// LockOneOf locks, for d, the lease row of one of the units whose lease
// node holds (pick chooses which), as LockUnit: the transaction of a
// killed node that vanished mid-apply. It returns the unit, "" if none.
func (c *Cluster) LockOneOf(node string, pick int, d time.Duration) string {
	return c.lockOneOf(node, "", pick, d)
}

// lockOneOf is LockOneOf among the units of source ("": of any source).
func (c *Cluster) lockOneOf(node, source string, pick int, d time.Duration) string {
	leases, err := c.inner.List(context.Background())
	if err != nil {
		return ""
	}
	var held []string
	for _, l := range leases {
		if l.Owner == node && (source == "" || sourceOf(l.Unit) == source) {
			held = append(held, l.Unit)
		}
	}
	if len(held) == 0 {
		return ""
	}
	u := held[pick%len(held)]
	c.LockUnit(u, d)
	return u
}

// CrashSupervisor makes node's supervisor of source fail (a panic). A
// paused node runs no code, so it does not crash: the crash is not queued
// for when it resumes (a storm queued so would hit one supervisor instance
// after another at resume and push its restart backoff to the cap).
func (c *Cluster) CrashSupervisor(node, source string) error {
	n, err := c.node(node)
	if err != nil {
		return err
	}
	if n.node == nil || (n.state != "running" && n.state != "stopping") || c.s.isPaused(n.sid) {
		return nil
	}
	c.event("crash-supervisor", node, source, "")
	c.exemptKills("crash " + node)
	c.touch()
	n.node.CrashSupervisor(source)
	return nil
}

// CrashStorm crashes node's supervisor of source n times, every gap. The
// cluster counts as disturbed from the first crash until the supervisor
// runs again after the last one (it takes no crash while it waits to
// restart), so checks that need a quiet cluster wait for it.
func (c *Cluster) CrashStorm(node, source string, n int, gap time.Duration) {
	what := "crash:" + node + "/" + source
	c.disturb(what)
	for i := 0; i < n; i++ {
		c.At(time.Duration(i)*gap, func() { _ = c.CrashSupervisor(node, source) })
	}
	var wait func()
	wait = func() {
		if c.sourceDown(node, source) {
			c.At(200*time.Millisecond, wait)
			return
		}
		c.Undisturb(what)
	}
	c.At(time.Duration(n)*gap, wait)
}

// sourceDown reports whether node's supervisor of source failed and waits
// to restart (false when the node does not run).
func (c *Cluster) sourceDown(node, source string) bool {
	n, err := c.node(node)
	if err != nil || n.node == nil || (n.state != "running" && n.state != "stopping") {
		return false
	}
	for _, st := range n.node.Tree().Sources {
		if st.Name == source {
			return st.State == actors.StateRetrying
		}
	}
	return false
}

// PendingTimers counts node's timers of kind (a clock.AfterFunc label:
// "quality", "discover", ...) not yet fired.
func (c *Cluster) PendingTimers(node, kind string) int {
	n, err := c.node(node)
	if err != nil || n.sid == 0 {
		return 0
	}
	return c.s.count(n.sid, "timer:"+kind)
}

// PendingJobs counts node's broker and store calls (executor jobs) queued,
// running or waiting, not yet delivered: what would be goroutines on a
// real node.
func (c *Cluster) PendingJobs(node string) int {
	n, err := c.node(node)
	if err != nil || n.sid == 0 {
		return 0
	}
	return c.s.countPrefix(n.sid, "job")
}

// errLockTimeout is what a call blocked by LockUnit fails with.
var errLockTimeout = fmt.Errorf("canceling statement due to lock timeout (simulated): %w", persistence.ErrBusy)

// waitLock waits, as a store call would, for a unit's row lock: up to the
// store timeout, then fails. The wait is virtual (exec.Pause).
func (a *auditStore) waitLock(ctx context.Context, unit string) error {
	until, ok := a.locks[unit]
	if !ok {
		return nil
	}
	now := a.c.s.now
	if !now.Before(until) {
		delete(a.locks, unit)
		return nil
	}
	wait := until.Sub(now)
	if t := a.c.cfg.StoreTimeout; wait > t {
		_ = exec.Pause(ctx, t)
		return fmt.Errorf("%s: %w", unit, errLockTimeout)
	}
	_ = exec.Pause(ctx, wait)
	return nil
}

// nodeStore is the store as one node reaches it: CutStore cuts it.
type nodeStore struct {
	*auditStore
	node string
}

var _ persistence.Store = nodeStore{}

func (n nodeStore) cutErr() error {
	if n.c.cut[n.node] {
		return fmt.Errorf("store unreachable from %s (simulated): %w", n.node, persistence.ErrInjected)
	}
	return nil
}

func (n nodeStore) Acquire(ctx context.Context, req persistence.AcquireRequest) (persistence.Lease, error) {
	n.c.countLease()
	if err := n.cutErr(); err != nil {
		return persistence.Lease{}, err
	}
	return n.auditStore.Acquire(ctx, req)
}

func (n nodeStore) Renew(ctx context.Context, l persistence.Lease, ttl time.Duration) (persistence.Lease, error) {
	n.c.countLease()
	if err := n.cutErr(); err != nil {
		return persistence.Lease{}, err
	}
	return n.auditStore.Renew(ctx, l, ttl)
}

func (n nodeStore) RenewLeases(ctx context.Context, owner string, ls []persistence.Lease, ttl time.Duration) ([]persistence.Lease, []string, error) {
	return persistence.RenewLeasesOf(ctx, n, owner, ls, ttl)
}

// RenewLeasesChanges is RenewLeases as a persistence.RenewAnswer.
func (n nodeStore) RenewLeasesChanges(ctx context.Context, owner string, ls []persistence.Lease, ttl time.Duration) (persistence.RenewAnswer, error) {
	n.c.countLease()
	if err := n.cutErr(); err != nil {
		return persistence.RenewAnswer{}, err
	}
	return n.auditStore.RenewLeasesChanges(ctx, owner, ls, ttl)
}

func (n nodeStore) Release(ctx context.Context, l persistence.Lease) error {
	n.c.countLease()
	if err := n.cutErr(); err != nil {
		return err
	}
	return n.auditStore.Release(ctx, l)
}

func (n nodeStore) Apply(ctx context.Context, b *persistence.Batch) (persistence.Applied, error) {
	if err := n.cutErr(); err != nil {
		return persistence.Applied{}, err
	}
	return n.auditStore.Apply(ctx, b)
}

// ApplyGroup fails every batch while the node is cut off the store.
func (n nodeStore) ApplyGroup(ctx context.Context, bs []*persistence.Batch) []persistence.GroupResult {
	if err := n.cutErr(); err != nil {
		out := make([]persistence.GroupResult, len(bs))
		for i := range out {
			out[i].Err = err
		}
		return out
	}
	return n.auditStore.ApplyGroup(ctx, bs)
}

// ParallelGroups is Config.ParallelGroups: how many groups a node keeps
// in flight, as PostgreSQL's pool size gives it.
func (n nodeStore) ParallelGroups() int { return max(1, n.auditStore.c.cfg.ParallelGroups) }

func (n nodeStore) Checkpoint(ctx context.Context, unit string) (persistence.Checkpoint, error) {
	if err := n.cutErr(); err != nil {
		return persistence.Checkpoint{}, err
	}
	return n.auditStore.Checkpoint(ctx, unit)
}

func (n nodeStore) Checkpoints(ctx context.Context, source string) ([]persistence.Checkpoint, error) {
	if err := n.cutErr(); err != nil {
		return nil, err
	}
	return n.auditStore.Checkpoints(ctx, source)
}

func (n nodeStore) InitSource(ctx context.Context, source string, units []string) ([]string, error) {
	if err := n.cutErr(); err != nil {
		return nil, err
	}
	return n.auditStore.InitSource(ctx, source, units)
}

func (n nodeStore) WriteQuality(ctx context.Context, w persistence.QualityWindow) (int64, error) {
	if err := n.cutErr(); err != nil {
		return 0, err
	}
	return n.auditStore.WriteQuality(ctx, w)
}

// unitInfo is what the testkit knows of a unit of a stream source, for the
// ownership check.
type unitInfo struct {
	source  string
	since   time.Time
	parents []string // unit ids
}
