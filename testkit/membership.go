package testkit

import (
	"context"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/drover-dev/drover/actors/placement"
)

// Simulated membership: what is modelled of memberlist, and what is not.
//
// The world below is the truth about the simulated nodes (who runs, who is
// paused, who is cut off, who left); every node process has its own view of
// it, which is all its actors see. A view knows members by name and
// incarnation: the scheduler id (sid) of the process, new at every start,
// stands for memberlist's incarnation number, so a restarted process is
// another incarnation of the same name.
//
// Modelled, with virtual time and no goroutines (every step is a task of the
// node on the scheduler, so a paused node's membership freezes and a killed
// one's stops):
//
//   - Probing. Every probe interval a node probes every member of its view:
//     a member whose known incarnation runs and is reachable is heard (and
//     its metadata, state and sources, refreshed); a member not heard for
//     the detection delay is declared dead, dropped, and remembered in the
//     node's dead list with its incarnation and the time; a member that left
//     gracefully is dropped at once (it announced it), and not remembered.
//   - Gossip to the dead. A member declared dead comes back into the view by
//     itself only if it is the SAME incarnation and reachable again within
//     gossipToTheDead (memberlist's GossipToTheDeadTime, 30 s by default) of
//     being declared dead: a short partition or GC pause heals alone. A new
//     incarnation (a restarted process) or a return after that is not taken
//     back: memberlist has reaped it and does not contact it again.
//   - Gossip within a cluster. At each probe a node learns a member x (with
//     x's current incarnation) when a member m of its view that it can reach
//     knows x with x's current incarnation and the node can reach x. So
//     knowledge spreads one hop per probe inside a connected cluster, never
//     across two clusters that share no member.
//   - Joining. A process starting contacts each seed of its join list that
//     runs and that it can reach and merges views with it (push-pull: each
//     side learns the members the other knows that it can reach). With no
//     seed reachable it forms a cluster of its own, whatever other nodes
//     exist: the restarted first node with an empty join list.
//   - Healing (architecture §4). Every heal interval (seeded jitter,
//     ±25 %) a node tries its join list and the members of its dead list declared dead
//     within the heal memory; each that runs, is reachable and is not in
//     the view with its current incarnation is merged with as a join does.
//     World.healing false switches this off (a mutation switch for tests).
//
// Not modelled: suspicion and its refutation (a member is alive until it is
// dead, after the detection delay), probe timeouts and indirect probes,
// packet loss and partial or asymmetric partitions (a node is cut off from
// every other node or from none), memberlist's periodic push-pull with a
// random member (every 30 s; in reality it also repairs a one-sided view,
// such as that of a node resumed after a pause longer than gossipToTheDead,
// which here only healing repairs: the model errs on the pessimistic side),
// the spreading of death by gossip (every node detects a death itself),
// encryption, and network latency of gossip (a merge is instantaneous).
type world struct {
	s         *scheduler
	rng       *rand.Rand // heal jitter; apart from the scheduler's source
	detection time.Duration
	probe     time.Duration
	healing   bool
	heal      time.Duration // heal interval
	memory    time.Duration // how long a dead member is retried
	members   map[string]*worldMember
	order     []string                        // member names, sorted
	event     func(kind, node, detail string) // notable membership events; may be nil
	changed   func(node string)               // called at every change of a view; may be nil
}

// gossipToTheDead is memberlist's default GossipToTheDeadTime.
const gossipToTheDead = 30 * time.Second

type worldMember struct {
	name     string
	addr     string // "sim://" + name, made once
	schedID  int    // the scheduler id of the current process; -1 when not running
	state    placement.MemberState
	left     bool
	isolated bool // partitioned away from every other node
	sources  []placement.SourceTag
	view     *simMembership // the current process's view
}

// worldConfig is what the world takes from Config.
type worldConfig struct {
	seed      uint64
	detection time.Duration
	healEvery time.Duration // 0: 2 s
	memory    time.Duration // 0: 10 min
	noHealing bool
}

func newWorld(s *scheduler, cfg worldConfig) *world {
	p := cfg.detection / 5
	if p > 200*time.Millisecond {
		p = 200 * time.Millisecond
	}
	if p < 10*time.Millisecond {
		p = 10 * time.Millisecond
	}
	if cfg.healEvery <= 0 {
		cfg.healEvery = 2 * time.Second
	}
	if cfg.memory <= 0 {
		cfg.memory = 10 * time.Minute
	}
	return &world{
		s: s, rng: rand.New(rand.NewPCG(cfg.seed^0x6d656d62, cfg.seed+0x68656131)),
		detection: cfg.detection, probe: p, healing: !cfg.noHealing, heal: cfg.healEvery, memory: cfg.memory,
		members: map[string]*worldMember{},
	}
}

func (w *world) running(m *worldMember) bool {
	return m.schedID >= 0 && !w.s.node(m.schedID).dead && !m.left
}

// reachable says whether a can hear b now.
func (w *world) reachable(a, b *worldMember) bool {
	if a == b {
		return true
	}
	if !w.running(a) || !w.running(b) || a.isolated || b.isolated {
		return false
	}
	return !w.s.node(b.schedID).paused
}

// current reports whether the incarnation sid of m is the one running now
// and a can reach it.
func (w *world) current(a, m *worldMember, sid int) bool {
	return m.schedID == sid && w.reachable(a, m)
}

// names lists the members by name, sorted; the caller must not change it.
func (w *world) names() []string { return w.order }

func (w *world) emit(kind, node, detail string) {
	if w.event != nil {
		w.event(kind, node, detail)
	}
}

// join starts a process of member name with scheduler id sid and join list
// seeds, and returns its view: it merges views with every seed it can
// reach, or starts a cluster of its own.
func (w *world) join(name string, sid int, seeds []string) *simMembership {
	m, ok := w.members[name]
	if !ok {
		m = &worldMember{name: name, addr: "sim://" + name}
		w.members[name] = m
		w.order = append(w.order, name)
		sort.Strings(w.order)
	}
	m.schedID, m.state, m.left, m.isolated = sid, placement.StateAlive, false, false
	v := &simMembership{w: w, me: m, sid: sid, join: slices.Clone(seeds), view: map[string]*viewEntry{},
		dead: map[string]deadEntry{}, watchers: map[int]func(){}}
	v.view[name] = &viewEntry{sid: sid, m: m.member(), heard: w.s.now}
	m.view = v
	var met []string
	for _, s := range v.join {
		o := w.members[s]
		if o == nil || o == m || !w.reachable(m, o) {
			continue
		}
		w.pushPull(v, o.view)
		met = append(met, s)
	}
	if len(met) == 0 {
		w.emit("member-alone", name, strconv.Itoa(sid))
	} else {
		w.emit("member-joined", name, strings.Join(met, ","))
	}
	v.scheduleProbe()
	v.scheduleHeal()
	return v
}

// pushPull merges the views of a and b, as memberlist's push-pull does:
// each learns the members the other knew before the exchange (in their
// current incarnation) that it can reach, and each learns the other.
func (w *world) pushPull(a, b *simMembership) {
	ka, kb := a.known(), b.known()
	ca := a.learn(b.me)
	for _, x := range kb {
		ca = a.learn(x) || ca
	}
	cb := b.learn(a.me)
	for _, x := range ka {
		cb = b.learn(x) || cb
	}
	if ca {
		a.notify()
	}
	if cb {
		b.notify()
	}
}

// settleGossip spreads gossip among all running views until nothing
// changes: processes started together find each other before owning
// anything.
func (w *world) settleGossip() {
	for changed := true; changed; {
		changed = false
		for _, n := range w.names() {
			if m := w.members[n]; w.running(m) && m.view != nil && m.view.gossip() {
				changed = true
			}
		}
	}
}

// bound is how soon views converge once every node that runs can reach
// every other: a heal interval at its longest (its jitter is +-25 %), the
// detection delay for a dead process's entry to go, and two probes for
// gossip to carry a merge to the rest of each side.
func (w *world) bound() time.Duration {
	return w.heal*5/4 + w.detection + 2*w.probe
}

// converged reports whether every running, non-paused node's view is the
// set of running nodes in their current incarnations.
func (w *world) converged() bool {
	want := map[string]int{}
	for n, m := range w.members {
		if w.running(m) {
			want[n] = m.schedID
		}
	}
	for _, m := range w.members {
		if !w.running(m) || w.s.node(m.schedID).paused {
			continue
		}
		if len(m.view.view) != len(want) {
			return false
		}
		for n, e := range m.view.view {
			if sid, ok := want[n]; !ok || sid != e.sid {
				return false
			}
		}
	}
	return true
}

// views lists, for every running node, its view as "name#sid", sorted.
func (w *world) views() map[string][]string {
	out := map[string][]string{}
	for n, m := range w.members {
		if !w.running(m) {
			continue
		}
		var vs []string
		for x, e := range m.view.view {
			vs = append(vs, x+"#"+strconv.Itoa(e.sid))
		}
		sort.Strings(vs)
		out[n] = vs
	}
	return out
}

func (m *worldMember) member() placement.Member {
	return placement.Member{Name: m.name, Addr: m.addr, DebugAddr: m.addr, Version: "sim", Capacity: 1,
		MaxCapacity: placement.DefaultMaxCapacity, State: m.state,
		Sources: slices.Clone(m.sources)}
}

// is reports whether p equals, field by field, what member returns now,
// without making it: every probe asks it of every member.
func (m *worldMember) is(p placement.Member) bool {
	return p.Name == m.name && p.Addr == m.addr && p.DebugAddr == m.addr && p.Version == "sim" && p.Capacity == 1 &&
		p.MaxCapacity == placement.DefaultMaxCapacity && p.State == m.state && p.SourceDigest == 0 && slices.Equal(p.Sources, m.sources)
}

// simMembership is one node process's membership view.
type simMembership struct {
	w        *world
	me       *worldMember
	sid      int // this process
	join     []string
	view     map[string]*viewEntry
	dead     map[string]deadEntry // members this process declared dead
	watchers map[int]func()
	nextW    int
	stopped  bool
}

type viewEntry struct {
	sid   int // the incarnation known
	m     placement.Member
	heard time.Time
}

type deadEntry struct {
	sid int
	at  time.Time
}

// live reports whether this is still the member's current process (a
// killed process's view object may linger in its actors).
func (v *simMembership) live() bool { return v.me.schedID == v.sid && v.me.view == v }

// known lists the members v knows in their current incarnation.
func (v *simMembership) known() []*worldMember {
	var out []*worldMember
	for _, n := range v.w.names() {
		if e, ok := v.view[n]; ok && v.w.members[n].schedID == e.sid {
			out = append(out, v.w.members[n])
		}
	}
	return out
}

// learn adds x in its current incarnation if v can reach it and does not
// know that incarnation yet; it reports whether the view changed.
func (v *simMembership) learn(x *worldMember) bool {
	if e, ok := v.view[x.name]; ok && e.sid == x.schedID {
		return false // known (the cheaper test first)
	}
	if !v.w.reachable(v.me, x) {
		return false
	}
	v.view[x.name] = &viewEntry{sid: x.schedID, m: x.member(), heard: v.w.s.now}
	delete(v.dead, x.name)
	return true
}

func (v *simMembership) scheduleProbe() {
	v.w.s.after(v.sid, v.w.probe, "probe", v.probeOnce)
}

func (v *simMembership) probeOnce() {
	if v.stopped {
		return
	}
	w, now, changed := v.w, v.w.s.now, false
	for _, n := range w.names() {
		o := w.members[n]
		if o == v.me {
			continue
		}
		e, in := v.view[n]
		switch {
		case in && w.current(v.me, o, e.sid):
			e.heard = now
			if !o.is(e.m) {
				e.m = o.member()
				changed = true
			}
		case in && o.left && !v.me.isolated:
			delete(v.view, n)
			changed = true
		case in && now.Sub(e.heard) >= w.detection:
			delete(v.view, n)
			v.dead[n] = deadEntry{sid: e.sid, at: now}
			changed = true
		case !in:
			// gossip to the dead: the same incarnation, back soon enough
			if d, ok := v.dead[n]; ok && d.sid == o.schedID && now.Sub(d.at) < gossipToTheDead && w.reachable(v.me, o) {
				changed = v.learn(o) || changed
			}
		}
	}
	if v.gossip() {
		changed = true
	}
	if changed {
		v.notify()
	}
	v.scheduleProbe()
}

// gossip learns, from every member of the view v can reach, the members it
// knows in their current incarnation that v can reach too.
func (v *simMembership) gossip() bool {
	w, changed := v.w, false
	for _, n := range w.names() {
		e, in := v.view[n]
		m := w.members[n]
		if !in || m == v.me || !w.current(v.me, m, e.sid) {
			continue
		}
		for _, xn := range w.names() {
			if xe, ok := m.view.view[xn]; ok {
				if x := w.members[xn]; x.schedID == xe.sid {
					changed = v.learn(x) || changed
				}
			}
		}
	}
	return changed
}

func (v *simMembership) scheduleHeal() {
	if !v.w.healing {
		return
	}
	d := v.w.heal*3/4 + time.Duration(v.w.rng.Int64N(int64(v.w.heal/2)+1))
	v.w.s.after(v.sid, d, "heal", v.healOnce)
}

// healOnce tries the join list and the members declared dead within the
// heal memory: each that runs, is reachable and is not known in its
// current incarnation is merged with.
func (v *simMembership) healOnce() {
	if v.stopped {
		return
	}
	w, now := v.w, v.w.s.now
	targets := slices.Clone(v.join)
	for _, n := range w.names() {
		d, ok := v.dead[n]
		switch {
		case !ok:
		case now.Sub(d.at) > w.memory:
			delete(v.dead, n) // forgotten
		default:
			targets = append(targets, n)
		}
	}
	tried := map[string]bool{}
	for _, n := range targets {
		o := w.members[n]
		if tried[n] || o == nil || o == v.me || !w.reachable(v.me, o) {
			continue
		}
		tried[n] = true
		if e, ok := v.view[n]; ok && e.sid == o.schedID {
			continue
		}
		w.pushPull(v, o.view)
		w.emit("member-healed", v.me.name, n)
	}
	v.scheduleHeal()
}

func (v *simMembership) notify() {
	if v.w.changed != nil {
		v.w.changed(v.me.name)
	}
	keys := make([]int, 0, len(v.watchers))
	for k := range v.watchers {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	for _, k := range keys {
		v.watchers[k]()
	}
}

func (v *simMembership) Local() placement.Member { return v.me.member() }

func (v *simMembership) Members() []placement.Member {
	out := make([]placement.Member, 0, len(v.view))
	for _, e := range v.view {
		out = append(out, e.m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (v *simMembership) Watch(f func()) func() {
	id := v.nextW
	v.nextW++
	v.watchers[id] = f
	return func() { delete(v.watchers, id) }
}

// SetState announces a new state; this node sees it at once, the others at
// their next probe.
func (v *simMembership) SetState(_ context.Context, s placement.MemberState) error {
	if !v.live() {
		return nil
	}
	v.me.state = s
	v.view[v.me.name].m = v.me.member()
	v.notify()
	return nil
}

// SetSources announces the sources this node runs; this node sees it at
// once, the others at their next probe.
func (v *simMembership) SetSources(_ context.Context, tags []placement.SourceTag) error {
	if !v.live() {
		return nil
	}
	v.me.sources = slices.Clone(tags)
	v.view[v.me.name].m = v.me.member()
	v.notify()
	return nil
}

// Leave tells the others this node is gone; they drop it at their next
// probe.
func (v *simMembership) Leave(context.Context) error {
	if v.live() {
		v.me.left = true
	}
	v.stopped = true
	return nil
}
