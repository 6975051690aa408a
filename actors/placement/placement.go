package placement

import (
	"math"
	"slices"
	"strings"
)

// Assign decides which member owns each unit. It is a pure function: every
// node that calls it with the same units and the same members (in any
// order) gets the same map, unit -> member name.
//
// # How
//
// Rendezvous (highest-random-weight) hashing, weighted by capacity: unit u
// scores member m with -w(m)/ln(h(u,m)), h in (0,1) a 64-bit hash of the
// pair, and prefers the member with the highest score. That is the
// "top choice" of u. Without a load bound every unit would go to its top
// choice, which moves only what must move on any change, but gives loads
// that spread around the fair share by about its square root.
//
// The load bound is then applied by deferred acceptance (unit-proposing
// Gale–Shapley with capacities): every unit proposes to its members in
// score order; a member holds at most cap(m) units and, when over, rejects
// the one it likes least, which then proposes to its next choice. A member
// likes units for which it is the top choice better than any other unit,
// then units for which it is the second choice, and so on; within one rank
// it likes the units it scores higher. The result is the unit-optimal stable
// matching, which is unique: it does not depend on the order in which units
// propose.
//
// # Invariants (tested in placement_test.go)
//
//   - Coverage: every distinct unit is in the map exactly once, owned by a
//     member whose State is StateAlive. No alive member => empty map.
//   - Bounded load: member m owns at most cap(m) = ceil(U·w(m)/W) + 1 units,
//     U the number of distinct units, w(m) its weight, W the sum of the
//     alive members' weights (computed with a 1e-9 slack, so that float
//     rounding never lifts an integer share to the next one).
//   - Fewest displaced: let top(m) be the number of units whose top choice
//     is m. Exactly sum over m of max(0, top(m) - cap(m)) units are not on
//     their top choice — the least any assignment within the bound can
//     reach — and a member over its bound keeps the top-choice units it
//     scores highest.
//   - Order-independence: permuting units or members does not change the
//     result. Duplicate units count once.
//
// # Movement, and the price of the bound
//
// A unit that is on its top choice before and after a membership change,
// and whose top choice did not change, does not move. Removing member x
// changes only the top choice of x's units; adding member z changes only
// the top choice of the units z now wins. So when a member leaves, the
// units that move without having been on the leaver number at most
// D(before) + D(after), where D counts the units not on their top choice;
// the same bound holds for units moving between old members when one
// joins. When no member is over its bound in either view (D = 0), exactly
// the leaver's units move, and a joiner takes exactly the units it wins.
//
// D grows with the number of units per member: with cap = fair share + 1
// and fair share f, plain rendezvous loads spread by about sqrt(f), so
// roughly 0.4·sqrt(f) units per member end up displaced (10,000 units on
// 50 members: D ≈ 2.3% of the units). A change then also moves some
// displaced units, mostly back to their top choice when the others' bounds
// step up after a leave; worst when the fair share was an integer before
// (every bound steps up at once). Measured over fixed random cases (the
// table in placement_test.go), a leave moves, besides the leaver's own
// units, 0.6–3.4% of all units: 11% of the leaver's count with 2–40 units
// per member, 32% with 200, and up to 70% when members own 1–5 units each;
// a join moves 0.6–2.2% of the units between old members while the joiner
// takes its fair share to within 2%. A looser bound would move less and
// balance worse; architecture §4 asks for the fair share, so the
// bound wins, and leases make every move safe.
//
// # Weights and edge cases
//
// maxCapacity is the clamp: a capacity above it counts as maxCapacity,
// whatever the member gossips. So a member that advertises 1e9 among n
// members of capacity 1 is given at most ceil(U·maxCapacity/(maxCapacity+n))
// + 1 of U units. The clamp bounds a member's share; it does not keep a
// member that joined from being given units (cluster.secret_key keeps
// outsiders from joining). Nodes that pass different values disagree on
// placement and may leave units unowned, so callers pass
// EffectiveMaxCapacity of the same members, which is the same on every
// node for a given view. maxCapacity <= 0 or NaN means DefaultMaxCapacity;
// above MaxCapacity it counts as MaxCapacity. Capacity <= 0, NaN or ±Inf
// counts as min(1, maxCapacity).
//
// Only members with State == StateAlive take part (leaving members get
// nothing). Members with the same name count once: the one with the higher
// capacity (then the lexically smaller other fields) is used. Scores use
// math.Log, so two nodes on different CPU architectures could in theory
// disagree on a near-tie one ulp apart; leases make such a disagreement
// safe, as they make every disagreement between views safe.
func Assign(units []string, members []Member, maxCapacity float64) map[string]string {
	us := distinctSorted(units)
	ms := liveMembers(members, maxCapacity)
	out := make(map[string]string, len(us))
	if len(us) == 0 || len(ms) == 0 {
		return out
	}
	owner := newPlacement(us, ms).run()
	for i, m := range owner {
		out[us[i]] = ms[m].name
	}
	return out
}

// Owned returns the units Assign gives to the member named self, sorted.
// It returns nil when self owns nothing (e.g. it is leaving or unknown).
func Owned(self string, units []string, members []Member, maxCapacity float64) []string {
	var own []string
	for u, m := range Assign(units, members, maxCapacity) {
		if m == self {
			own = append(own, u)
		}
	}
	slices.Sort(own)
	return own
}

// DefaultMaxCapacity is the default of cluster.max_capacity, the largest
// placement weight a member counts with: a node may be given up to 16
// times the units of a default node (capacity 1), and a member gossiping
// more (a misconfigured node, a member of a loopback cluster without
// cluster.secret_key) is given no more than that.
const DefaultMaxCapacity = 16

// MaxCapacity is the largest cluster.max_capacity allows.
const MaxCapacity = 1000

// capLimit is the clamp Assign applies for its maxCapacity argument.
func capLimit(maxCapacity float64) float64 {
	switch {
	case math.IsNaN(maxCapacity) || maxCapacity <= 0:
		return DefaultMaxCapacity
	case maxCapacity > MaxCapacity:
		return MaxCapacity
	}
	return maxCapacity
}

// weight is the placement weight of a capacity when no member counts
// more than limit (a capLimit).
func weight(c, limit float64) float64 {
	switch {
	case math.IsNaN(c) || math.IsInf(c, 0) || c <= 0:
		return min(1, limit)
	case c > limit:
		return limit
	}
	return c
}

// loadBound is cap(m) = ceil(U·w/W) + 1. The tiny slack keeps a share that
// is an integer up to rounding (U·w/W = 3.0000000000000004) from rounding
// up; the +1 keeps the sum of bounds >= U + N regardless, so every unit
// always finds room.
func loadBound(units int, w, total float64) int {
	return int(math.Ceil(float64(units)*w/total-1e-9)) + 1
}

// distinctSorted returns the units sorted, without duplicates, in a new
// slice.
func distinctSorted(units []string) []string {
	us := slices.Clone(units)
	slices.Sort(us)
	return slices.Compact(us)
}

// member is an alive member as placement sees it.
type member struct {
	name string
	w    float64
	salt uint64 // memberSalt(hashString(name)), the member's half of pairHash
}

// liveMembers returns the alive members, one per name, sorted by name,
// weighted with the clamp of maxCapacity.
func liveMembers(members []Member, maxCapacity float64) []member {
	limit := capLimit(maxCapacity)
	alive := make([]Member, 0, len(members))
	for _, m := range members {
		if m.State == StateAlive {
			alive = append(alive, m)
		}
	}
	// Sort by name; among equal names put the one we keep first.
	slices.SortFunc(alive, func(a, b Member) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		if wa, wb := weight(a.Capacity, limit), weight(b.Capacity, limit); wa != wb {
			if wa > wb {
				return -1
			}
			return 1
		}
		if c := strings.Compare(a.Addr, b.Addr); c != 0 {
			return c
		}
		if c := strings.Compare(a.DebugAddr, b.DebugAddr); c != 0 {
			return c
		}
		return strings.Compare(a.Version, b.Version)
	})
	out := make([]member, 0, len(alive))
	for i, m := range alive {
		if i > 0 && m.Name == alive[i-1].Name {
			continue
		}
		out = append(out, member{name: m.Name, w: weight(m.Capacity, limit), salt: memberSalt(hashString(m.Name))})
	}
	return out
}

// hashString is 64-bit FNV-1a followed by a finaliser, so that names that
// differ in one trailing byte ("orders/1", "orders/2") still differ in
// every bit.
func hashString(s string) uint64 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= prime
	}
	return mix64(h)
}

// mix64 is a bijective 64-bit finaliser with full avalanche (the constants
// of MurmurHash3's fmix64).
func mix64(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// memberSalt turns a member's name hash into its half of pairHash: a
// second, offset round, so that pairHash of (a, b) and of (b, a) are
// unrelated.
func memberSalt(nameHash uint64) uint64 {
	return mix64(nameHash + 0x9e3779b97f4a7c15)
}

// pairHash is the hash of (unit, member), from the unit's name hash and
// the member's salt.
func pairHash(unit, salt uint64) uint64 {
	return mix64(unit ^ salt)
}

// bid is how much a unit wants a member: the weighted rendezvous score and,
// to break exact ties, the raw hash and then the member's index (names are
// distinct and sorted, so the index is a deterministic order).
type bid struct {
	score float64
	hash  uint64
	m     int
}

// newBid scores member m (index i) for a unit whose hash is uh.
func newBid(uh uint64, m member, i int) bid {
	x := pairHash(uh, m.salt)
	// h in (0,1): 52 bits plus one half, exactly representable, never 0 or 1.
	h := (float64(x>>12) + 0.5) / (1 << 52)
	return bid{score: -m.w / math.Log(h), hash: x, m: i}
}

// above reports whether a is preferred to b.
func (a bid) above(b bid) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	if a.hash != b.hash {
		return a.hash > b.hash
	}
	return a.m < b.m
}

// placement is the state of one deferred-acceptance run.
type placement struct {
	units   []string
	uhash   []uint64
	members []member
	caps    []int
	held    []holding // per member: the units it holds
	last    []bid     // per unit: the member it proposed to last
	rank    []int     // per unit: how many members it proposed to before
	owner   []int     // per unit: member index, -1 while free
}

func newPlacement(units []string, members []member) *placement {
	p := &placement{
		units:   units,
		uhash:   make([]uint64, len(units)),
		members: members,
		caps:    make([]int, len(members)),
		held:    make([]holding, len(members)),
		last:    make([]bid, len(units)),
		rank:    make([]int, len(units)),
		owner:   make([]int, len(units)),
	}
	var total float64
	for _, m := range members {
		total += m.w
	}
	for i, m := range members {
		p.caps[i] = loadBound(len(units), m.w, total)
	}
	for i, u := range units {
		p.uhash[i] = hashString(u)
		p.owner[i] = -1
	}
	return p
}

// run proposes until every unit is held, and returns the owner of each
// unit as a member index.
//
// Termination: each rejection moves one unit strictly down its own
// preference list, so there are at most U·N proposals. No unit is rejected
// by every member: a member that rejected once holds exactly cap(m) units
// from then on, so if all had rejected, they would hold sum(cap) >= U + N
// units between them, more than there are.
func (p *placement) run() []int {
	free := make([]int, len(p.units))
	for i := range free {
		// Pop in unit order; the result does not depend on it.
		free[i] = len(free) - 1 - i
	}
	for len(free) > 0 {
		u := free[len(free)-1]
		free = free[:len(free)-1]
		b := p.next(u)
		p.last[u] = b
		h := &p.held[b.m]
		h.push(hold{unit: u, rank: p.rank[u], bid: b})
		p.owner[u] = b.m
		p.rank[u]++
		if len(*h) > p.caps[b.m] {
			out := h.pop()
			p.owner[out.unit] = -1
			free = append(free, out.unit)
		}
	}
	return p.owner
}

// next is the best bid of unit u below the one it made last (the best bid
// of all when it has not proposed yet).
func (p *placement) next(u int) bid {
	var best bid
	found := false
	for i, m := range p.members {
		b := newBid(p.uhash[u], m, i)
		if p.rank[u] > 0 && !p.last[u].above(b) {
			continue
		}
		if !found || b.above(best) {
			best, found = b, true
		}
	}
	if !found {
		// Unreachable: the bounds sum to more than U (see run).
		panic("cluster: placement found no member with room")
	}
	return best
}

// hold is a unit held by a member.
type hold struct {
	unit int
	rank int // the member's position in the unit's preference, 0 = top
	bid  bid
}

// worse reports whether the member likes a less than b: a higher rank,
// then a lower bid, then a later unit.
func (a hold) worse(b hold) bool {
	if a.rank != b.rank {
		return a.rank > b.rank
	}
	if a.bid.score != b.bid.score {
		return a.bid.score < b.bid.score
	}
	if a.bid.hash != b.bid.hash {
		return a.bid.hash < b.bid.hash
	}
	return a.unit > b.unit
}

// holding is a binary heap of held units, the least liked on top.
type holding []hold

func (h *holding) push(x hold) {
	*h = append(*h, x)
	s := *h
	for i := len(s) - 1; i > 0; {
		parent := (i - 1) / 2
		if !s[i].worse(s[parent]) {
			break
		}
		s[i], s[parent] = s[parent], s[i]
		i = parent
	}
}

func (h *holding) pop() hold {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	for i := 0; ; {
		l, r, least := 2*i+1, 2*i+2, i
		if l < len(s) && s[l].worse(s[least]) {
			least = l
		}
		if r < len(s) && s[r].worse(s[least]) {
			least = r
		}
		if least == i {
			break
		}
		s[i], s[least] = s[least], s[i]
		i = least
	}
	*h = s
	return top
}
