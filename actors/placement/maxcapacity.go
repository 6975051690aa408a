package placement

import (
	"slices"
	"strconv"
	"strings"
)

// EffectiveMaxCapacity is the clamp placement uses for a view: the
// smallest cluster.max_capacity among own (this node's; <= 0 or NaN means
// DefaultMaxCapacity, above MaxCapacity counts as MaxCapacity) and the
// values the alive members of the view gossip. A member that gossips none
// (0, as a drover from before the value was gossiped), a negative value
// or NaN is left out; a value above own changes nothing.
//
// Pass the result to Assign and Owned. It depends only on the view (every
// alive member gossips its own value, this node included), so nodes with
// different cluster.max_capacity settings, as during a rolling change of
// the value, still agree on placement. A member gossiping a lower value can
// only lower everyone's clamp, which makes weights more equal; it cannot
// raise any member's share above what own allows.
func EffectiveMaxCapacity(members []Member, own float64) float64 {
	limit := capLimit(own)
	for _, m := range members {
		if m.State == StateAlive && m.MaxCapacity > 0 {
			limit = min(limit, m.MaxCapacity)
		}
	}
	return limit
}

// MaxCapacityMismatch describes a view whose alive members gossip
// different cluster.max_capacity values, as "name=value" pairs sorted by
// name and separated by spaces ("a=4 b=1 c=8"). It returns "" when they
// all agree; members that gossip none (see EffectiveMaxCapacity) are left
// out.
func MaxCapacityMismatch(members []Member) string {
	var alive []Member
	for _, m := range members {
		if m.State == StateAlive && m.MaxCapacity > 0 {
			alive = append(alive, m)
		}
	}
	mixed := false
	for _, m := range alive {
		if m.MaxCapacity != alive[0].MaxCapacity {
			mixed = true
			break
		}
	}
	if !mixed {
		return ""
	}
	slices.SortFunc(alive, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	parts := make([]string, len(alive))
	for i, m := range alive {
		parts[i] = m.Name + "=" + strconv.FormatFloat(m.MaxCapacity, 'g', -1, 64)
	}
	return strings.Join(parts, " ")
}
