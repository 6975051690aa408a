package testkit

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/persistence"
)

// Invariants checked while a cluster runs, besides those of the ledger
// (audit.go, ledger.go). Each is checked on every seed of `drover sim`:
//
//   - ownership: once the cluster has been quiet (no fault in force, no
//     node event) for OwnershipQuiet, every unit that can be read (not
//     finished, its parents finished or forgotten, its source run by some
//     running node) is leased to a running node that runs its source,
//     within OwnershipBound. Units of partitions added after the start are
//     held to it once a discovery interval has passed.
//   - deadlines: a queue message in flight never passes its ack deadline
//     while the cluster is quiet (the unit extends it while it applies).
//   - supervisors: a node has at most one pending quality tick and one
//     pending discovery per source it runs (a restarted supervisor leaves
//     none of its timers behind).
//   - sporadic failures: a unit never fails to its supervisor because of
//     failures separated by successful fetches.
//   - membership: once the cluster is quiet, every running node's view is
//     the running nodes (checked at the end, after Settle).
//   - stops: a graceful stop finishes within StopBound.
//   - lag: at the end, lag_seconds is -1 or >= 0, never -1 for a unit
//     that fetched (the memory brokers date every message; checkLag); when
//     Settle ends, lag and lag_seconds are 0 for every running stream unit
//     (checkCaughtUp).
//   - tree: at the end of every virtual instant, a running node's tree
//     lists no unit twice and no unit stopped under a supervisor that runs
//     (a stopped unit leaves the tree in the instant it stops; one that
//     stays is a ghost, such as a late write of a restarted supervisor's
//     unit).

const (
	// OwnershipQuiet is how long the cluster must be quiet before the
	// ownership check applies.
	OwnershipQuiet = 4 * time.Second
	// OwnershipBound is how long a readable unit may stay without an owner
	// in a quiet cluster.
	OwnershipBound = 6 * time.Second
)

// StopBound bounds a graceful stop: the units' StopTimeout (10 s) and a
// margin for their releases.
const StopBound = 15 * time.Second

// errSporadic marks the sparse fetch failures of FailSporadically.
const sporadicMark = "sporadic fetch failure (simulated)"

// startChecks schedules the periodic checks (a task of the world).
func (c *Cluster) startChecks() {
	var tick func()
	tick = func() {
		c.checkOwnership()
		c.checkDeadlines()
		c.s.after(-1, time.Second, "check", tick)
	}
	c.s.after(-1, time.Second, "check", tick)
}

func (c *Cluster) check(inv, detail string) {
	c.checks = append(c.checks, Violation{Invariant: inv, Detail: detail})
	c.event("VIOLATION", "", inv, detail)
}

// checkOwnership is the ownership invariant.
func (c *Cluster) checkOwnership() {
	if !c.quiet(OwnershipQuiet) {
		clear(c.unowned)
		return
	}
	ctx := context.Background()
	leases, err := c.inner.List(ctx)
	if err != nil {
		return
	}
	held := make(map[string]persistence.Lease, len(leases))
	for _, l := range leases {
		held[l.Unit] = l
	}
	cps := map[string]persistence.Checkpoint{}
	for name := range c.streams {
		list, err := c.inner.Checkpoints(ctx, name)
		if err != nil {
			return
		}
		for _, cp := range list {
			cps[cp.Unit] = cp
		}
	}
	now := c.s.now
	down := map[string]bool{} // node/source whose supervisor failed and waits to restart
	for _, name := range c.Running() {
		if n := c.nodes[name]; n.node != nil {
			for _, st := range n.node.Tree().Sources {
				if st.State == actors.StateRetrying {
					down[name+"/"+st.Name] = true
				}
			}
		}
	}
	running := c.Running()
	bySource := map[string][]string{} // source -> the nodes that run it now
	for _, u := range c.readableUnits(cps) {
		src := sourceOf(u)
		runners, ok := bySource[src]
		if !ok {
			for _, name := range running {
				if n := c.nodes[name]; n.state == "running" && c.runs(n, src) && !down[name+"/"+src] {
					runners = append(runners, name)
				}
			}
			bySource[src] = runners
		}
		if len(runners) == 0 {
			delete(c.unowned, u)
			continue
		}
		l, ok := held[u]
		if ok && slices.Contains(runners, l.Owner) && l.ExpiresAt.After(now) {
			delete(c.unowned, u)
			continue
		}
		since, ok := c.unowned[u]
		if !ok {
			c.unowned[u] = now
			continue
		}
		if now.Sub(since) >= OwnershipBound {
			c.check("ownership", fmt.Sprintf("%s has had no owner among %v for %s in a quiet cluster (lease: %s token %d)",
				u, runners, now.Sub(since), l.Owner, l.Token))
			c.unowned[u] = now.Add(time.Hour) // once
		}
	}
}

// readableUnits lists the units the ownership check applies to now.
func (c *Cluster) readableUnits(cps map[string]persistence.Checkpoint) []string {
	now := c.s.now
	var out []string
	for _, u := range slices.Sorted(maps.Keys(c.units)) {
		info := c.units[u]
		if cps[u].Finished {
			continue
		}
		spec := c.specByName(info.source)
		if spec == nil {
			continue
		}
		disc := spec.Discovery
		if disc <= 0 {
			disc = 30 * time.Second
		}
		if !info.since.IsZero() && now.Sub(info.since) < disc {
			continue // not discovered yet, perhaps
		}
		ready := true
		for _, p := range info.parents {
			if c.forgotten[p] {
				continue
			}
			if cp := cps[p]; !cp.Finished || now.Sub(cp.UpdatedAt) < OwnershipQuiet {
				ready = false
			}
		}
		if ready {
			out = append(out, u)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.queues)) {
		spec := c.specByName(name)
		slots := max(spec.Slots, 1)
		for i := range slots {
			out = append(out, name+"/slot-"+strconv.Itoa(i))
		}
	}
	return out
}

// checkTrees is the tree invariant, checked at the end of every virtual
// instant on the nodes whose mailboxes ran in it (scheduler.instantDone:
// only actors write a tree). A unit's end and its supervisor handling the
// termination are mailbox runs of one node at one instant, so a unit shown
// stopped under a running supervisor once the instant is over is a ghost:
// an entry nobody will remove.
func (c *Cluster) checkTrees(sids map[int]bool) {
	for _, name := range c.order {
		n := c.nodes[name]
		if !sids[n.sid] {
			continue
		}
		if n.node == nil || n.state != "running" || c.s.isPaused(n.sid) {
			c.forgetGhosts(name, nil)
			n.clean = treeVersion{} // its ghosts are forgotten: look again
			continue
		}
		v := treeVersion{n.node, n.node.StatesVersion(), n.metrics.version()}
		if v == n.clean {
			// nothing it checks changed since it was clean: clean again,
			// with the same ghosts seen (all already reported)
			continue
		}
		if seen, ok := c.treeClean(name, n); ok {
			c.forgetGhosts(name, seen)
			n.clean = v
			continue
		}
		n.clean = treeVersion{}
		// something to report: go through the tree in its order, so that
		// what is reported comes in the same order on every run
		seen := map[string]bool{}
		units := map[string]int{}
		reported, keys := n.metrics.snapshot()
		shown := map[string]bool{}
		for _, st := range n.node.Tree().Sources {
			for _, u := range st.Units {
				units[u.Unit]++
				su := st.Name + "|" + u.Unit
				shown[su] = true
				if got, ok := reported[su]; !ok || got != u.State {
					c.check("metrics", fmt.Sprintf("%s's metrics show %s in state %q, its tree %q", name, u.Unit, got, u.State))
				}
				if st.State != actors.StateRunning || u.State != actors.StateStopped {
					continue
				}
				k := name + "|" + u.Unit
				seen[k] = true
				if !c.ghosts[k] {
					c.ghosts[k] = true // once while it stays
					c.check("tree", fmt.Sprintf("%s lists %s as stopped under its running supervisor (a ghost: no child of the supervisor runs it)", name, u.Unit))
				}
			}
		}
		for _, u := range slices.Sorted(maps.Keys(units)) {
			if units[u] > 1 {
				c.check("tree", fmt.Sprintf("%s lists %s %d times", name, u, units[u]))
			}
		}
		for _, k := range keys {
			if !shown[k] {
				c.check("metrics", fmt.Sprintf("%s's metrics keep a state series for %s, which its tree no longer lists", name, k))
			}
		}
		c.forgetGhosts(name, seen)
	}
}

// forgetGhosts drops node's reported ghosts not in seen: a ghost that comes
// back is reported again.
func (c *Cluster) forgetGhosts(node string, seen map[string]bool) {
	for k := range c.ghosts {
		if strings.HasPrefix(k, node+"|") && !seen[k] {
			delete(c.ghosts, k)
		}
	}
}

// checkDeadlines is the deadline invariant: every expiry of a queue
// delivery must fall in a time something happened to the cluster.
func (c *Cluster) checkDeadlines() {
	for _, name := range slices.Sorted(maps.Keys(c.queues)) {
		q := c.queues[name]
		exp := q.Expiries()
		seen := c.expiriesSeen[name]
		c.expiriesSeen[name] = len(exp)
		for _, e := range exp[seen:] {
			deadline := c.ackDeadline[name]
			if c.quietDuring(e.At.Add(-deadline-time.Second), e.At) {
				c.check("deadline", fmt.Sprintf("%s: message %s held by %s passed its ack deadline at %s in a quiet cluster (not extended)",
					name, e.ID, e.Slot, e.At.Sub(epoch)))
			}
		}
	}
}

// endChecks runs the checks that look at the end of a run.
func (c *Cluster) endChecks() []Violation {
	var out []Violation
	for _, name := range c.Running() {
		n := c.nodes[name]
		sources := 0
		for _, sp := range c.specs {
			if c.runs(n, sp.Name) {
				sources++
			}
		}
		for _, kind := range []string{"quality", "discover"} {
			if k := c.PendingTimers(name, kind); k > sources {
				out = append(out, Violation{"timers", fmt.Sprintf("%s has %d pending %s timers for %d sources (a restarted supervisor left its timers running?)", name, k, kind, sources)})
			}
		}
	}
	for _, name := range c.order {
		if n := c.nodes[name]; n.state == "stopping" && c.s.now.Sub(n.stopAt) > StopBound {
			out = append(out, Violation{"stop", fmt.Sprintf("%s began its graceful stop %s ago and has not finished (bound %s)", name, c.s.now.Sub(n.stopAt), StopBound)})
		}
	}
	out = append(out, c.checkLag()...)
	for _, e := range c.log {
		if e.Kind == "fail-to-supervisor" && strings.Contains(e.Detail, sporadicMark) {
			out = append(out, Violation{"sporadic", fmt.Sprintf("%s on %s failed to its supervisor at %s on failures separated by successful fetches: %s", e.Unit, e.Node, e.Time.Sub(epoch), e.Detail)})
		}
	}
	return out
}

// checkLag is the lag invariant at the end of a run: every unit's
// lag_seconds is -1 or at least 0, and the memory brokers date every
// message, so a unit that has fetched never shows -1. checkCaughtUp is its
// other half, run by Settle.
func (c *Cluster) checkLag() []Violation {
	var out []Violation
	c.eachUnit(func(node string, _ bool, u actors.UnitStatus) {
		switch {
		case u.LagSeconds < 0 && u.LagSeconds != -1:
			out = append(out, Violation{"lag", fmt.Sprintf("%s shows %s with lag_seconds %v (want -1 or >= 0)", node, u.Unit, u.LagSeconds)})
		case u.LagSeconds == -1 && u.LastPullAt != nil:
			out = append(out, Violation{"lag", fmt.Sprintf("%s shows %s with lag_seconds -1 after a fetch from a broker that dates every message", node, u.Unit)})
		}
	})
	return out
}

// checkCaughtUp: once Settle has applied every message and let the
// results reach the actors, every running stream unit that fetched shows
// lag 0 and lag_seconds 0. (Right when the store has everything, a unit
// may still hold a batch whose commit it has not heard of: it shows that
// batch's age until then.)
func (c *Cluster) checkCaughtUp() {
	c.eachUnit(func(node string, stream bool, u actors.UnitStatus) {
		if stream && u.State == actors.StateRunning && u.LastPullAt != nil && (u.Lag != 0 || u.LagSeconds != 0) {
			c.check("lag", fmt.Sprintf("%s shows %s caught up with lag %d, lag_seconds %v (want 0, 0)", node, u.Unit, u.Lag, u.LagSeconds))
		}
	})
}

// eachUnit calls f with every unit of every running node's tree, in order,
// saying whether it is a stream's.
func (c *Cluster) eachUnit(f func(node string, stream bool, u actors.UnitStatus)) {
	for _, name := range c.Running() {
		for _, st := range c.nodes[name].node.Tree().Sources {
			_, stream := c.streams[st.Name]
			for _, u := range st.Units {
				f(name, stream, u)
			}
		}
	}
}

func (c *Cluster) specByName(name string) *specInfo {
	for i := range c.specs {
		if c.specs[i].Name == name {
			return &specInfo{Slots: c.specs[i].Slots, Discovery: c.specs[i].Discovery}
		}
	}
	return nil
}

type specInfo struct {
	Slots     int
	Discovery time.Duration
}

// treeClean is the tree invariant's fast path: it reports whether checking
// node's tree as checkTrees does would report nothing and mark no new
// ghost, and, if so, the ghosts it would see (nil if none). It walks the
// tree's states without copying or sorting it (checkTrees runs at nearly
// every virtual instant: with hundreds of units per node the sorted copy
// was most of a large simulation's time).
func (c *Cluster) treeClean(name string, n *simNode) (map[string]bool, bool) {
	units := c.treeUnits
	if units == nil {
		units = map[string]int{}
		c.treeUnits = units
	}
	clear(units)
	var seen map[string]bool
	clean, found := true, 0
	m := n.metrics
	// the tree's lock, then the metrics' (the order the runtime takes
	// them in when a state changes)
	n.node.UnitStates(func(source, sourceState, unit, state string) {
		units[unit]++
		if units[unit] > 1 {
			clean = false
		}
		m.mu.Lock()
		got, ok := m.states[unitKey{source, unit}]
		m.mu.Unlock()
		if !ok || got != state {
			clean = false
		} else {
			found++
		}
		if sourceState != actors.StateRunning || state != actors.StateStopped {
			return
		}
		k := name + "|" + unit
		if seen == nil {
			seen = map[string]bool{}
		}
		seen[k] = true
		if !c.ghosts[k] {
			clean = false
		}
	})
	// every state series is of a unit shown (the units shown are distinct
	// per source, so found counts distinct series)
	m.mu.Lock()
	if found != len(m.states) {
		clean = false
	}
	m.mu.Unlock()
	return seen, clean
}

// treeVersion is a node process and the versions of its tree's and its
// metrics' states.
type treeVersion struct {
	node          *actors.Node
	tree, metrics uint64
}
