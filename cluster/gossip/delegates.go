package gossip

// The memberlist delegates: this node's metadata out, join, update, leave,
// merge and conflict events in.

import (
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/drover-dev/drover/actors/placement"
)

// metaDelegate serves this node's metadata to memberlist. The other
// methods of memberlist.Delegate are not used: drover sends no user
// messages and keeps no user state in gossip.
type metaDelegate Membership

func (d *metaDelegate) NodeMeta(limit int) []byte {
	m := (*Membership)(d)
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.meta) > limit {
		// Validate and newMeta keep the metadata under
		// memberlist.MetaMaxSize; a smaller limit would be a memberlist
		// change. Send the state only.
		return nodeMeta{Name: m.cfg.Name, State: m.local.State}.encode()
	}
	return slices.Clone(m.meta)
}

func (*metaDelegate) NotifyMsg([]byte)                           {}
func (*metaDelegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (*metaDelegate) LocalState(join bool) []byte                { return nil }
func (*metaDelegate) MergeRemoteState(buf []byte, join bool)     {}

// eventDelegate hears joins, leaves and updates. memberlist calls it with
// its node lock held, never concurrently: it copies the node into the
// view, logs and notifies, and never calls memberlist.
type eventDelegate Membership

func (d *eventDelegate) NotifyJoin(n *memberlist.Node) {
	m := (*Membership)(d)
	e := m.record(n)
	switch {
	case n.Name == m.cfg.Name:
	case e.err != nil:
		m.log.Warn("member without readable drover metadata is ignored", "member", n.Name, "addr", e.addr, "err", e.err)
	default:
		m.log.Info("member joined", "member", n.Name, "addr", e.addr, "state", e.member.State)
	}
	m.notify()
}

func (d *eventDelegate) NotifyUpdate(n *memberlist.Node) {
	m := (*Membership)(d)
	e := m.record(n)
	if e.err != nil {
		m.log.Warn("member without readable drover metadata is ignored", "member", n.Name, "addr", e.addr, "err", e.err)
	} else {
		m.log.Debug("member updated", "member", n.Name, "state", e.member.State, "capacity", e.member.Capacity, "max_capacity", e.member.MaxCapacity)
	}
	m.notify()
}

func (d *eventDelegate) NotifyLeave(n *memberlist.Node) {
	m := (*Membership)(d)
	m.viewMu.Lock()
	// memberlist v0.7.0 never sets n.State: a member that said "leaving"
	// before it went is taken to have left, any other to have died.
	how := "died"
	if prev, ok := m.view[n.Name]; ok && prev.err == nil && prev.member.State == placement.StateLeaving {
		how = "left"
	}
	delete(m.view, n.Name)
	if how == "died" && n.Name != m.cfg.Name {
		m.gone[n.Name] = gone{addr: n.Address(), at: time.Now()}
	} else {
		delete(m.gone, n.Name)
	}
	m.viewMu.Unlock()
	m.log.Info("member gone", "member", n.Name, "addr", n.Address(), "how", how)
	m.notify()
}

// record copies n into the view. Only event callbacks may call it.
func (m *Membership) record(n *memberlist.Node) viewEntry {
	mem, err := member(n)
	e := viewEntry{addr: n.Address(), member: mem, err: err}
	m.viewMu.Lock()
	m.view[n.Name] = e
	delete(m.gone, n.Name)
	m.viewMu.Unlock()
	return e
}

// mergeDelegate refuses a join that would give one name two live members.
// memberlist asks it on both sides of a join's state exchange: the joiner
// refuses when the cluster already has its name, and a member refuses a
// joiner that brings a name it knows alive at another address. memberlist
// alone would only log the conflict and ignore the newcomer, which would
// then believe it had joined.
type mergeDelegate Membership

func (d *mergeDelegate) NotifyMerge(peers []*memberlist.Node) error {
	m := (*Membership)(d)
	self := m.self.Load()
	if self == nil {
		return nil // memberlist not up yet: nothing to compare with
	}
	known := map[string]string{}
	m.viewMu.Lock()
	for name, e := range m.view {
		known[name] = e.addr
	}
	m.viewMu.Unlock()
	known[m.cfg.Name] = *self
	for _, p := range peers {
		if p.State == memberlist.StateDead || p.State == memberlist.StateLeft {
			continue // a dead member's name may be taken over
		}
		addr, ok := known[p.Name]
		if !ok || addr == p.Address() {
			continue
		}
		if p.Name == m.cfg.Name {
			m.dup.CompareAndSwap(nil, p)
			m.log.Error("this node's name is already used by another member", "name", p.Name, "other", p.Address(), "self", addr)
		} else {
			m.log.Error("refused a node whose name is already in use", "name", p.Name, "known_at", addr, "joiner_at", p.Address())
		}
		return fmt.Errorf("%w: %q is at %s and at %s", ErrDuplicateName, p.Name, addr, p.Address())
	}
	return nil
}

// conflictDelegate hears name conflicts memberlist finds in gossip (a
// duplicate that got past the join check, e.g. two nodes started with the
// same name into two clusters that later merge).
type conflictDelegate Membership

func (d *conflictDelegate) NotifyConflict(existing, other *memberlist.Node) {
	m := (*Membership)(d)
	m.log.Error("two nodes claim one name; the newer is ignored", "name", existing.Name, "known_at", existing.Address(), "other_at", other.Address())
}
