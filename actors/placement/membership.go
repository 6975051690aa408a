package placement

import (
	"context"
	"hash/fnv"
	"slices"
)

// MemberState is what a member says about itself in gossip.
type MemberState string

const (
	// StateAlive members take part in placement.
	StateAlive MemberState = "alive"
	// StateLeaving members are handing their units over: placement gives
	// them nothing, but their leases are still theirs until released.
	StateLeaving MemberState = "leaving"
)

// Member is one node as the membership view knows it.
type Member struct {
	Name      string `json:"name"`
	Addr      string `json:"addr"`       // gossip address
	DebugAddr string `json:"debug_addr"` // HTTP debug endpoint
	// DebugTLS says the debug endpoint serves HTTPS (node.debug_tls).
	DebugTLS bool    `json:"debug_tls,omitempty"`
	Version  string  `json:"version"`
	Capacity float64 `json:"capacity"` // placement weight; <= 0 means 1
	// MaxCapacity is the member's cluster.max_capacity. Placement clamps
	// every capacity to the smallest value an alive member gossips (see
	// EffectiveMaxCapacity). 0 when the member did not say, as a drover
	// from before it was gossiped: it is then left out.
	MaxCapacity float64     `json:"max_capacity,omitempty"`
	State       MemberState `json:"state"`
	// Sources are the sources the member runs, with the unit set it has
	// discovered of each, sorted by ID. Nil (and SourceDigest 0) when the
	// member did not say, as a drover from before sources were gossiped:
	// it is taken to run every source.
	Sources []SourceTag `json:"sources,omitempty"`
	// SourceDigest, when not 0, stands for Sources when they did not fit
	// in the member's gossiped metadata: SourceDigestOf its source IDs.
	SourceDigest uint64 `json:"source_digest,omitempty"`
}

// SourceTag says that a member runs a source.
type SourceTag struct {
	// ID is SourceID of the source's identity.
	ID uint32 `json:"id"`
	// Units is UnitsHash of the unit set the member discovered for it: 0
	// before its first discovery.
	Units uint32 `json:"units,omitempty"`
}

// SourceID is the hash members gossip for a source. identity is what must
// be equal for two nodes to run "the same" source: its name, type and what
// it reads (see actors.SourceSpec.Identity).
func SourceID(identity string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(identity))
	if v := h.Sum32(); v != 0 {
		return v
	}
	return 1
}

// UnitsHash hashes a set of unit ids (in any order); never 0.
func UnitsHash(units []string) uint32 {
	sorted := slices.Sorted(slices.Values(units))
	h := fnv.New32a()
	for _, u := range slices.Compact(sorted) {
		h.Write([]byte(u))
		h.Write([]byte{0})
	}
	if v := h.Sum32(); v != 0 {
		return v
	}
	return 1
}

// SourceDigestOf is the digest of a set of source IDs (in any order);
// never 0.
func SourceDigestOf(ids []uint32) uint64 {
	sorted := slices.Compact(slices.Sorted(slices.Values(ids)))
	h := fnv.New64a()
	for _, id := range sorted {
		h.Write([]byte{byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id)})
	}
	if v := h.Sum64(); v != 0 {
		return v
	}
	return 1
}

// Source returns m's tag of the source with id, and whether m runs it.
// known is false when m's gossip cannot tell: it said nothing (an older
// drover; taken to run it), or only a digest, in which case it runs the
// source when its digest equals localDigest, the digest of the sources of
// the node asking (which runs this source): same configuration, same
// sources.
func (m Member) Source(id uint32, localDigest uint64) (tag SourceTag, runs, known bool) {
	switch {
	case m.Sources != nil:
		i, ok := slices.BinarySearchFunc(m.Sources, id, func(t SourceTag, id uint32) int {
			switch {
			case t.ID < id:
				return -1
			case t.ID > id:
				return 1
			}
			return 0
		})
		if ok {
			return m.Sources[i], true, true
		}
		return SourceTag{}, false, true
	case m.SourceDigest != 0:
		return SourceTag{ID: id}, m.SourceDigest == localDigest, false
	}
	return SourceTag{ID: id}, true, false
}

// Membership is this node's view of the cluster.
//
// Implementations are safe for concurrent use. Members and Local never
// block on the network.
type Membership interface {
	// Local is this node.
	Local() Member
	// Members returns the members alive in this view (alive or leaving),
	// this node included, sorted by name. The caller owns the slice.
	Members() []Member
	// Watch calls f after every change of the view, from a goroutine the
	// implementation owns; f must not block. The returned func stops it.
	Watch(f func()) (stop func())
	// SetState announces this node's state to the others.
	SetState(ctx context.Context, s MemberState) error
	// SetSources announces the sources this node runs (sorted by ID; the
	// caller keeps the slice). Local changes at once; the others hear of it
	// through gossip. It may wait for the broadcast like SetState.
	SetSources(ctx context.Context, tags []SourceTag) error
	// Leave tells the others this node is gone and stops gossiping.
	Leave(ctx context.Context) error
}
