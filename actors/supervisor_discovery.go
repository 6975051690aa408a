package actors

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/drover-dev/drover/actors/placement"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/internal/exec"
	"github.com/drover-dev/drover/internal/mutate"
)

// ---- discovery: listing the units, comparing them with other members ----

// discover lists the units (streams: partitions and which are finished;
// queues: the configured slots) and schedules the next listing.
func (s *supervisor) discover(ctx actor.Context) {
	if s.discovery != nil {
		s.discovery.Stop()
	}
	s.discovery = s.after(ctx, s.spec.Discovery, &discoverTick{from: s})
	s.discoveryAt = s.node.env.Clock.Now().Add(s.spec.Discovery)
	s.lastDisc = s.node.env.Clock.Now()
	s.discSeq++
	seq := s.discSeq
	if s.spec.isQueue() {
		parts := make([]brokers.Partition, s.spec.Slots)
		for i := range parts {
			parts[i] = brokers.Partition{ID: "slot-" + strconv.Itoa(i)}
		}
		s.onDiscovered(ctx, &discovered{seq: seq, parts: parts})
		return
	}
	stream, store, name := s.spec.Stream, s.node.env.Store, s.spec.Name
	needInitial := s.initial == nil
	self, root, jobs := ctx.Self(), ctx.ActorSystem().Root, s.jobs
	s.node.env.Executor.Go(exec.WithLabel(jobs, "discover"), func(c context.Context) any {
		parts, err := stream.Partitions(c)
		if err != nil {
			return &discovered{seq: seq, err: fmt.Errorf("list partitions: %w", err)}
		}
		fin := map[string]bool{}
		cps, err := store.Checkpoints(c, name)
		if err != nil {
			return &discovered{seq: seq, err: fmt.Errorf("read checkpoints: %w", err)}
		}
		for _, cp := range cps {
			if cp.Finished {
				fin[cp.Unit] = true
			}
		}
		d := &discovered{seq: seq, parts: parts, finished: fin}
		if needInitial {
			ids := make([]string, len(parts))
			for i, p := range parts {
				ids[i] = name + "/" + p.ID
			}
			if d.initial, err = store.InitSource(c, name, ids); err != nil {
				return &discovered{seq: seq, err: fmt.Errorf("record the initial units: %w", err)}
			}
		}
		return d
	}, func(v any) {
		if jobs.Err() == nil {
			root.Send(self, v)
		}
	})
}

func (s *supervisor) onDiscovered(ctx actor.Context, m *discovered) {
	if m.seq < s.discApplied {
		s.node.env.trace("discovery-dropped", s.spec.Name, fmt.Sprintf("seq=%d applied=%d", m.seq, s.discApplied))
		return // older than a listing already applied
	}
	s.discApplied = m.seq
	if m.err != nil {
		msg := m.err.Error()
		s.node.reg.source(s.spec.Name, func(st *SourceStatus) { st.Error = msg; st.State = StateRetrying })
		s.node.env.trace("discovery-failed", s.spec.Name, msg)
		// try again sooner than the regular interval
		if s.discovery != nil {
			s.discovery.Stop()
		}
		d := s.node.tuning.RestartBase + s.node.env.Rand.Jitter(s.node.tuning.RestartBase)
		if d > s.spec.Discovery {
			d = s.spec.Discovery
		}
		s.discovery = s.after(ctx, d, &discoverTick{from: s})
		s.discoveryAt = s.node.env.Clock.Now().Add(d)
		return
	}
	state := StateRunning
	if s.draining {
		state = StateStopping
	}
	s.node.reg.source(s.spec.Name, func(st *SourceStatus) { st.Error = ""; st.State = state })
	if m.initial != nil && s.initial == nil {
		s.initial = slices.Sorted(slices.Values(m.initial))
		if s.initial == nil {
			s.initial = []string{} // known: no unit was listed at the first discovery
		}
	}
	listed := make(map[string]bool, len(m.parts))
	for _, p := range m.parts {
		listed[p.ID] = true
	}
	units := make(map[string]struct{}, len(m.parts))
	var parentsOf map[string][]string
	for _, p := range m.parts {
		// A parent the stream no longer lists (aged past retention) counts
		// as finished: nothing of it can be read any more.
		var parents []string
		for _, par := range p.Parents {
			if listed[par] || mutate.On(mutate.WaitForUnlistedParents) {
				parents = append(parents, par)
			}
		}
		u := s.spec.Name + "/" + p.ID
		if c, ok := s.children[u]; ok && len(parents) < len(s.parents[u]) {
			s.tell(ctx, c, &parentsListed{parents: parents})
		}
		units[u] = struct{}{}
		if len(parents) > 0 {
			if parentsOf == nil {
				parentsOf = map[string][]string{}
			}
			parentsOf[u] = parents
		}
	}
	if len(units) != len(s.units) {
		s.node.env.trace("discovered", s.spec.Name, strconv.Itoa(len(units)))
	}
	s.units, s.parents = units, parentsOf
	for u := range m.finished {
		s.finished[u] = true
	}
	s.unitsChanged()
	// A unit is finished because it was closed by a reshard, so its
	// children are listed as long as it is. A finished unit listed with no
	// child listed is a partition of a stream created again with the same
	// ids: its checkpoint is of the old stream, and it is read again (its
	// open resets the checkpoint).
	children := map[string]bool{}
	for _, p := range m.parts {
		for _, par := range p.Parents {
			children[s.spec.Name+"/"+par] = true
		}
	}
	for _, u := range slices.Sorted(maps.Keys(s.finished)) {
		if m.seq <= s.finishedAt[u] {
			continue // listed before the unit finished here: its children may be missing
		}
		if _, listed := units[u]; listed && !children[u] && !s.spec.isQueue() {
			delete(s.finished, u)
			s.unitsChanged()
			s.stale[u] = true
			s.node.env.trace("finished-stale", u, "")
		}
	}
	s.announceUnits(ctx)
	s.reconcile(ctx)
}

// announceUnits tells the node actor (and through gossip the others) which
// units this node discovered, so that a member that sees other units
// discovers again (unit sets converge after a reshard).
func (s *supervisor) announceUnits(ctx actor.Context) {
	ids := make([]string, 0, len(s.units))
	for u := range s.units {
		if s.finished[u] {
			ids = append(ids, u+"#finished")
		} else {
			ids = append(ids, u)
		}
	}
	h := placement.UnitsHash(ids)
	if h != s.hash {
		s.hash = h
		ctx.Send(ctx.Parent(), &sourceUnits{source: s.spec.Name, hash: h})
	}
}

// compareUnits discovers again when a member that runs this source says
// it discovered other units than this node did (at most every
// DiscoverySpacing).
func (s *supervisor) compareUnits(ctx actor.Context) {
	if s.hash == 0 || s.spec.isQueue() {
		return
	}
	for _, m := range s.members {
		tag, runs, known := m.Source(s.id, s.node.digest.Load())
		if !runs || !known || tag.Units == 0 || tag.Units == s.hash || m.Name == s.node.env.Node {
			continue
		}
		if s.node.env.Clock.Now().Sub(s.lastDisc) >= s.node.tuning.DiscoverySpacing {
			s.node.env.trace("discover-triggered", s.spec.Name, m.Name)
			s.discover(ctx)
		} else if at := s.lastDisc.Add(s.node.tuning.DiscoverySpacing); s.discovery != nil && at.Before(s.discoveryAt) {
			// as soon as the spacing allows (never later than planned)
			s.discovery.Stop()
			s.discovery = s.after(ctx, at.Sub(s.node.env.Clock.Now()), &discoverTick{from: s})
			s.discoveryAt = at
		}
		return
	}
}
