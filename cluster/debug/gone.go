package debug

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/actors/placement"
)

// Defaults of the memory of gone members (Config.GoneFor, Config.MaxGone).
const (
	// DefaultGoneFor is how long a member that left or died stays in the
	// cluster view's "gone" list: long enough for someone who opens the
	// page after a kill -9 to see where its units went.
	DefaultGoneFor = 5 * time.Minute
	// DefaultMaxGone bounds that list; the member gone longest is
	// forgotten first.
	DefaultMaxGone = 32
)

// How a member went (GoneInfo.How), as gossip tells it apart: a member
// that announced "leaving" before it went has left, any other has died.
const (
	GoneDied = "died"
	GoneLeft = "left"
)

// GoneNode is a member that is no longer in the membership view, with the
// last tree this endpoint read of it (Contract extension: an entry of
// "gone" in the cluster tree). Its sources and units are where they were
// when it was last read, not where they are now.
type GoneNode struct {
	NodeTree
	Gone GoneInfo `json:"gone"`
}

// GoneInfo says when and how a member went.
type GoneInfo struct {
	// Since is when this endpoint first saw the member missing from the
	// view (to within one cluster fan-out: SampleEvery, or a second while
	// a page is open).
	Since time.Time `json:"since"`
	// How is GoneDied or GoneLeft.
	How string `json:"how"`
	// LastError is the error of the last attempt to read its tree, when
	// that attempt failed (a killed node stops answering before gossip
	// declares it dead); "" when the last attempt succeeded.
	LastError string `json:"last_error"`
	// TreeAt is when its tree was last read; nil when it never was (its
	// sources are then empty).
	TreeAt *time.Time `json:"tree_at"`
}

// goneMemory remembers, for a bounded time and count, the last tree of
// each member that left the view. It sees each cluster fan-out's result
// (observe); it is safe for concurrent use.
type goneMemory struct {
	keep time.Duration
	max  int

	mu   sync.Mutex
	live map[string]*lastSeen // members of the last view, by name
	gone []GoneNode           // oldest first
}

// lastSeen is what the memory knows of a live member.
type lastSeen struct {
	tree    actors.Tree // last tree read; zero when never
	treeAt  time.Time   // zero when never
	lastErr string      // error of the last read, "" when it succeeded
	state   placement.MemberState
}

func newGoneMemory(keep time.Duration, max int) *goneMemory {
	return &goneMemory{keep: keep, max: max, live: map[string]*lastSeen{}}
}

// observe records one cluster view read at now: nodes are the trees (or
// errors) of the members listed, states their gossiped states. A member
// of the last view that is not listed now has gone; a gone member listed
// again is live again. self is the node that reads the view: it never
// goes from its own view, so its tree (all of its units: 10,000 on a big
// node) is not kept.
func (g *goneMemory) observe(now time.Time, self string, nodes []NodeTree, states map[string]placement.MemberState) {
	g.mu.Lock()
	defer g.mu.Unlock()
	listed := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		listed[n.Node] = true
		if n.Node == self {
			continue
		}
		e := g.live[n.Node]
		if e == nil {
			e = &lastSeen{}
			g.live[n.Node] = e
		}
		if n.Error == "" {
			e.tree, e.treeAt, e.lastErr = n.Tree, now, ""
		} else {
			e.lastErr = n.Error
		}
		if st, ok := states[n.Node]; ok {
			e.state = st
		}
	}
	g.gone = slices.DeleteFunc(g.gone, func(x GoneNode) bool { return listed[x.Node] })
	// Map order must not decide which of several members that went at
	// once is dropped first by the bound: sorted by name.
	var went []string
	for name := range g.live {
		if !listed[name] {
			went = append(went, name)
		}
	}
	slices.Sort(went)
	for _, name := range went {
		e := g.live[name]
		delete(g.live, name)
		t := e.tree
		t.Node = name
		info := GoneInfo{Since: now, How: GoneDied, LastError: e.lastErr}
		if e.state == placement.StateLeaving {
			info.How = GoneLeft
		}
		if !e.treeAt.IsZero() {
			at := e.treeAt
			info.TreeAt = &at
		}
		g.gone = append(g.gone, GoneNode{NodeTree: NodeTree{Tree: normalize(t)}, Gone: info})
	}
	g.expire(now)
}

// expire forgets the members gone for keep or longer, then the oldest
// beyond max.
func (g *goneMemory) expire(now time.Time) {
	g.gone = slices.DeleteFunc(g.gone, func(x GoneNode) bool { return now.Sub(x.Gone.Since) >= g.keep })
	if over := len(g.gone) - g.max; over > 0 {
		g.gone = slices.Delete(g.gone, 0, over)
	}
}

// list is the members gone as of now, sorted by name (never nil). The
// entries share their trees with the memory: callers only read them.
func (g *goneMemory) list(now time.Time) []GoneNode {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.expire(now)
	out := slices.Clone(g.gone)
	if out == nil {
		out = []GoneNode{}
	}
	slices.SortStableFunc(out, func(a, b GoneNode) int { return strings.Compare(a.Node, b.Node) })
	return out
}
