package cluster

import "context"

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
	Name      string      `json:"name"`
	Addr      string      `json:"addr"`       // gossip address
	DebugAddr string      `json:"debug_addr"` // HTTP debug endpoint
	Version   string      `json:"version"`
	Capacity  float64     `json:"capacity"` // placement weight; <= 0 means 1
	State     MemberState `json:"state"`
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
	// Leave tells the others this node is gone and stops gossiping.
	Leave(ctx context.Context) error
}
