package actors

import (
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/drover-dev/drover/actors/placement"
)

// ---- sources added and removed at run time (a live reload) ----

// ErrSourceConflict is why AddSource or RemoveSource refused: a name in
// use or unknown, a source being removed, or the node stopping.
var ErrSourceConflict = errors.New("source change refused")

type (
	addSource struct {
		spec  *SourceSpec
		reply chan error
	}
	removeSource struct {
		name  string
		reply chan error
	}
	// leaseTTL tells the leaser the shortest lease TTL of the node's
	// sources now (a source added with a shorter one renews in time).
	leaseTTL struct{ ttl time.Duration }
)

// AddSource starts a source's supervisor at run time: it is gossiped, its
// units are placed like those of the sources the node started with. The
// channel receives nil once the supervisor is spawned, or why not. It does
// not block: the caller waits (or not) on the channel.
func (n *Node) AddSource(spec SourceSpec) <-chan error {
	reply := make(chan error, 1)
	s, err := spec.withDefaults()
	if err != nil {
		reply <- err
		return reply
	}
	if err := n.sendSourceChange(&addSource{spec: &s, reply: reply}); err != nil {
		reply <- err
	}
	return reply
}

// RemoveSource stops a source at run time: the node stops gossiping it (so
// that placement gives its units to the others), its units finish their
// batch, checkpoint and release their leases as on a graceful leave, and
// its supervisor stops. The channel receives nil once the supervisor has
// stopped (whoever owns the source's broker may close it then), or why
// not.
func (n *Node) RemoveSource(name string) <-chan error {
	reply := make(chan error, 1)
	if err := n.sendSourceChange(&removeSource{name: name, reply: reply}); err != nil {
		reply <- err
	}
	return reply
}

func (n *Node) sendSourceChange(msg any) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed || n.draining {
		return fmt.Errorf("%w: the node is stopping", ErrSourceConflict)
	}
	n.node.system.Root.Send(n.root, msg)
	return nil
}

// addSource starts m's source (on the node actor).
func (a *nodeActor) addSource(ctx actor.Context, m *addSource) {
	name := m.spec.Name
	if a.draining {
		m.reply <- fmt.Errorf("%w: source %s: the node is stopping", ErrSourceConflict, name)
		return
	}
	if a.removing[name] != nil {
		m.reply <- fmt.Errorf("%w: source %s: still being removed", ErrSourceConflict, name)
		return
	}
	for _, s := range a.specs {
		if s.Name == name {
			m.reply <- fmt.Errorf("%w: source %s: name used twice", ErrSourceConflict, name)
			return
		}
	}
	a.specs = append(a.specs, m.spec)
	a.tags[name] = placement.SourceTag{ID: placement.SourceID(m.spec.Identity)}
	a.shared.reg.addSource(name, m.spec.Type)
	a.sourcesChanged(ctx)
	if m.spec.LeaseTTL > 0 {
		ctx.Send(a.shared.leaser, &leaseTTL{ttl: m.spec.LeaseTTL})
	}
	if a.started {
		a.spawnSupervisor(ctx, m.spec)
	}
	a.shared.env.trace("source-added", name, "")
	m.reply <- nil
}

// removeSource stops m's source (on the node actor); m.reply is answered
// when its supervisor has stopped (onTerminated).
func (a *nodeActor) removeSource(ctx actor.Context, m *removeSource) {
	if a.draining {
		m.reply <- fmt.Errorf("%w: source %s: the node is stopping", ErrSourceConflict, m.name)
		return
	}
	i := a.specIndex(m.name)
	if i < 0 || a.removing[m.name] != nil {
		m.reply <- fmt.Errorf("%w: no source %s runs here", ErrSourceConflict, m.name)
		return
	}
	a.specs = append(a.specs[:i:i], a.specs[i+1:]...)
	delete(a.tags, m.name)
	a.sourcesChanged(ctx) // the others place its units without this node
	a.shared.env.trace("source-removing", m.name, "")
	pid := a.sups[m.name]
	if pid == nil {
		// not spawned yet (before the start-up sweep's end)
		a.forgetSource(m.name)
		m.reply <- nil
		return
	}
	a.removing[m.name] = m.reply
	if a.down[m.name] {
		// failed, waiting to restart: its units stopped with it
		if t := a.restartT[m.name]; t != nil {
			t.Stop()
			delete(a.restartT, m.name)
		}
		ctx.Stop(pid)
		return
	}
	ctx.Send(pid, &drain{}) // drainedMsg then stops it
}

// onSourceDrained stops the supervisor of a source being removed once its
// units have stopped; it reports whether name is one.
func (a *nodeActor) onSourceDrained(ctx actor.Context, name string) bool {
	if a.removing[name] == nil {
		return false
	}
	if pid := a.sups[name]; pid != nil {
		ctx.Stop(pid)
	}
	return true
}

// onTerminated ends the removal of the source whose supervisor stopped.
func (a *nodeActor) onTerminated(who *actor.PID) {
	name, ok := a.byPID[who.Id]
	if !ok {
		return
	}
	reply := a.removing[name]
	if reply == nil {
		return
	}
	delete(a.byPID, who.Id)
	delete(a.sups, name)
	delete(a.removing, name)
	a.forgetSource(name)
	a.shared.env.trace("source-removed", name, "")
	reply <- nil
}

// forgetSource drops what the node actor and the tree keep of a removed
// source.
func (a *nodeActor) forgetSource(name string) {
	delete(a.down, name)
	delete(a.restarts, name)
	delete(a.restartedAt, name)
	if t := a.restartT[name]; t != nil {
		t.Stop()
		delete(a.restartT, name)
	}
	a.shared.reg.removeSource(name)
}

func (a *nodeActor) specIndex(name string) int {
	for i, s := range a.specs {
		if s.Name == name {
			return i
		}
	}
	return -1
}

// sourcesChanged recomputes the node's source digest and gossips the
// sources it runs now.
func (a *nodeActor) sourcesChanged(ctx actor.Context) {
	a.shared.digest.Store(digestOf(a.specs))
	a.announce(ctx)
}

// digestOf is placement.SourceDigestOf the specs' identities.
func digestOf(specs []*SourceSpec) uint64 {
	ids := make([]uint32, 0, len(specs))
	for _, s := range specs {
		ids = append(ids, placement.SourceID(s.Identity))
	}
	return placement.SourceDigestOf(ids)
}

// spawnSupervisor starts spec's supervisor.
func (a *nodeActor) spawnSupervisor(ctx actor.Context, spec *SourceSpec) {
	props := actor.PropsFromProducer(func() actor.Actor { return newSupervisor(a.shared, spec) }, a.shared.props()...)
	pid := ctx.SpawnPrefix(props, "source-"+spec.Name)
	a.sups[spec.Name] = pid
	a.byPID[pid.Id] = spec.Name
}
