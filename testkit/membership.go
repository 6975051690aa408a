package testkit

import (
	"context"
	"slices"
	"sort"
	"time"

	"github.com/drover-dev/drover/cluster"
)

// world is the truth about the simulated nodes that membership views
// approximate: who runs, who is paused, who is cut off, who left.
//
// Each node's view is kept by a probe task of that node, every probe
// interval: a member it can reach is (re)added with its current metadata;
// a member it has not reached for the detection delay is dropped; a member
// that left gracefully is dropped at once. A paused node's probes are held
// like all its tasks, so its view freezes, as a stopped process's would.
type world struct {
	s         *scheduler
	detection time.Duration
	probe     time.Duration
	members   map[string]*worldMember
}

type worldMember struct {
	name     string
	schedID  int // the scheduler id of the current process; -1 when not running
	state    cluster.MemberState
	left     bool
	isolated bool // partitioned away from every other node
	sources  []cluster.SourceTag
	view     *simMembership
}

func newWorld(s *scheduler, detection time.Duration) *world {
	p := detection / 5
	if p > 200*time.Millisecond {
		p = 200 * time.Millisecond
	}
	if p < 10*time.Millisecond {
		p = 10 * time.Millisecond
	}
	return &world{s: s, detection: detection, probe: p, members: map[string]*worldMember{}}
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

// join starts a process of member name with scheduler id sid and returns
// its membership view, which starts knowing the members it can reach.
func (w *world) join(name string, sid int) *simMembership {
	m, ok := w.members[name]
	if !ok {
		m = &worldMember{name: name}
		w.members[name] = m
	}
	m.schedID, m.state, m.left, m.isolated = sid, cluster.StateAlive, false, false
	v := &simMembership{w: w, me: m, view: map[string]cluster.Member{}, heard: map[string]time.Time{}, watchers: map[int]func(){}}
	m.view = v
	for _, o := range w.members {
		if w.reachable(m, o) {
			v.view[o.name] = o.member()
			v.heard[o.name] = w.s.now
		}
	}
	v.scheduleProbe()
	return v
}

func (m *worldMember) member() cluster.Member {
	return cluster.Member{Name: m.name, Addr: "sim://" + m.name, DebugAddr: "sim://" + m.name, Version: "sim", Capacity: 1, State: m.state,
		Sources: slices.Clone(m.sources)}
}

func sameMember(a, b cluster.Member) bool {
	return a.Name == b.Name && a.Addr == b.Addr && a.DebugAddr == b.DebugAddr && a.Version == b.Version &&
		a.Capacity == b.Capacity && a.State == b.State && a.SourceDigest == b.SourceDigest && slices.Equal(a.Sources, b.Sources)
}

// simMembership is one node's membership view.
type simMembership struct {
	w        *world
	me       *worldMember
	view     map[string]cluster.Member
	heard    map[string]time.Time
	watchers map[int]func()
	nextW    int
	stopped  bool
}

// refresh adds every member this node can reach now, without waiting for
// a probe.
func (v *simMembership) refresh() {
	for _, o := range v.w.members {
		if v.w.reachable(v.me, o) {
			v.view[o.name] = o.member()
			v.heard[o.name] = v.w.s.now
		}
	}
}

func (v *simMembership) scheduleProbe() {
	v.w.s.after(v.me.schedID, v.w.probe, "probe", v.probeOnce)
}

func (v *simMembership) probeOnce() {
	if v.stopped {
		return
	}
	w, now, changed := v.w, v.w.s.now, false
	names := make([]string, 0, len(w.members))
	for n := range w.members {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		o := w.members[n]
		cur, in := v.view[n]
		switch {
		case w.reachable(v.me, o):
			v.heard[n] = now
			if !in || !sameMember(cur, o.member()) {
				v.view[n] = o.member()
				changed = true
			}
		case in && o.left && !v.me.isolated:
			delete(v.view, n)
			changed = true
		case in && now.Sub(v.heard[n]) >= w.detection:
			delete(v.view, n)
			changed = true
		}
	}
	if changed {
		v.notify()
	}
	v.scheduleProbe()
}

func (v *simMembership) notify() {
	keys := make([]int, 0, len(v.watchers))
	for k := range v.watchers {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	for _, k := range keys {
		v.watchers[k]()
	}
}

func (v *simMembership) Local() cluster.Member { return v.me.member() }

func (v *simMembership) Members() []cluster.Member {
	out := make([]cluster.Member, 0, len(v.view))
	for _, m := range v.view {
		out = append(out, m)
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
func (v *simMembership) SetState(_ context.Context, s cluster.MemberState) error {
	v.me.state = s
	v.view[v.me.name] = v.me.member()
	v.notify()
	return nil
}

// SetSources announces the sources this node runs; this node sees it at
// once, the others at their next probe.
func (v *simMembership) SetSources(_ context.Context, tags []cluster.SourceTag) error {
	v.me.sources = slices.Clone(tags)
	v.view[v.me.name] = v.me.member()
	v.notify()
	return nil
}

// Leave tells the others this node is gone; they drop it at their next
// probe.
func (v *simMembership) Leave(context.Context) error {
	v.me.left = true
	v.stopped = true
	return nil
}
