package debug

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/actors/placement"
)

// maxTreeBytes bounds the body of another member's tree.
const maxTreeBytes = 32 << 20

// ClusterTree is the JSON of GET /debug/tree?scope=cluster (architecture §10):
// {"nodes": [<tree>, …]}, sorted by node name, and "gone": the members
// that left the view in the last Config.GoneFor, with their last tree
// (absent when there are none). Self names the node that answered: the
// one whose page can post controls to it (a control is same-origin only).
type ClusterTree struct {
	Self  string     `json:"self,omitempty"`
	Nodes []NodeTree `json:"nodes"`
	Gone  []GoneNode `json:"gone,omitempty"`
}

// NodeTree is one node of a ClusterTree: the node's tree in the Contract
// shape, plus Error when the node did not answer. A node with an Error has
// its name and empty members and sources. DebugURL is the base URL of
// another member's debug endpoint as this node reaches it (its page is
// where that member's own controls, drain and undrain, are posted);
// empty for the answering node itself and for a member whose address
// gives none.
type NodeTree struct {
	actors.Tree
	Error    string `json:"error,omitempty"`
	DebugURL string `json:"debug_url,omitempty"`
}

// normalize makes nil slices empty so the JSON has [] where the Contract
// shows a list, never null.
func normalize(t actors.Tree) actors.Tree {
	if t.Members == nil {
		t.Members = []actors.MemberStatus{}
	}
	if t.Sources == nil {
		t.Sources = []actors.SourceStatus{}
	}
	for i := range t.Sources {
		if t.Sources[i].Units == nil {
			t.Sources[i].Units = []actors.UnitStatus{}
		}
	}
	return t
}

func failed(name string, err error) NodeTree {
	return NodeTree{Tree: normalize(actors.Tree{Node: name}), Error: err.Error()}
}

// flight is one cluster fan-out, shared by the requests that come while
// it runs.
type flight struct {
	done chan struct{} // closed once ct is set
	ct   ClusterTree
	// lazy: ct.Nodes[self] holds only this node's name. The background
	// sample reads this node's counters instead of its tree (a snapshot
	// of 10,000 units copied 2.5 MB every sample); a request that shares
	// the flight takes the tree when it asks for it (tree).
	lazy bool
	self int

	once sync.Once // the whole tree and its JSON are made once, for the first caller that wants them
	full ClusterTree
	body []byte
	err  error
}

// tree is the flight's whole cluster tree.
func (f *flight) tree(n Node) ClusterTree {
	f.once.Do(func() {
		f.full = f.ct
		if f.lazy {
			f.full.Nodes = slices.Clone(f.ct.Nodes)
			f.full.Nodes[f.self] = NodeTree{Tree: normalize(n.Tree())}
		}
		f.body, f.err = json.Marshal(f.full)
	})
	return f.full
}

// clusterJSON is the cluster tree as JSON (see fanOut).
func (s *Server) clusterJSON(ctx context.Context) ([]byte, error) {
	f, err := s.fanOut(ctx, nil)
	if err != nil {
		return nil, err
	}
	f.tree(s.cfg.Node)
	return f.body, f.err
}

// fanOut returns the flight of the cluster tree. At most one fan-out runs
// at a time: a request that comes while one runs waits for it (or for its
// own ctx) and answers with the same tree, which was asked for at most
// FetchTimeout before. The fan-out runs on the goroutine of the request
// that started it, and does not end when that request's client goes: the
// others wait on it. The tree is shared: callers only read it; its JSON
// is made only when a caller asks for it (the background sample does not).
// A fan-out started with a CounterReader (the background sample) leaves
// this node's tree out of ct until a caller asks for it (flight.tree).
func (s *Server) fanOut(ctx context.Context, lazy CounterReader) (*flight, error) {
	s.flightMu.Lock()
	if f := s.flight; f != nil {
		s.flightMu.Unlock()
		s.waiters.Add(1)
		defer s.waiters.Add(-1)
		select {
		case <-f.done:
			return f, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	f := &flight{done: make(chan struct{}), lazy: lazy != nil}
	s.flight = f
	s.flightMu.Unlock()
	defer func() {
		s.flightMu.Lock()
		s.flight = nil
		s.flightMu.Unlock()
		close(f.done)
	}()
	ct, self, states := s.clusterTree(context.WithoutCancel(ctx), lazy)
	now := s.cfg.Clock.Now()
	s.gone.observe(now, self, ct.Nodes, states)
	ct.Gone = s.gone.list(now)
	f.ct = ct
	f.self = slices.IndexFunc(ct.Nodes, func(n NodeTree) bool { return n.Node == self })
	return f, nil
}

// clusterTree is this node's tree (only its name with lazy) and every
// other live member's, asked concurrently, with the members' gossiped
// states; it returns when every member answered or failed; self is this
// node's name.
func (s *Server) clusterTree(ctx context.Context, lazy CounterReader) (ct ClusterTree, self string, states map[string]placement.MemberState) {
	var local actors.Tree
	if lazy != nil {
		local = normalize(actors.Tree{Node: lazy.Name()})
	} else {
		local = normalize(s.cfg.Node.Tree())
	}
	var others []placement.Member
	seen := map[string]bool{local.Node: true}
	states = map[string]placement.MemberState{}
	for _, m := range s.cfg.Node.Members() {
		states[m.Name] = m.State
		if !seen[m.Name] {
			seen[m.Name] = true
			others = append(others, m)
		}
	}
	nodes := make([]NodeTree, len(others)+1)
	nodes[0] = NodeTree{Tree: local}
	var wg sync.WaitGroup
	for i, m := range others {
		wg.Go(func() {
			base, _ := memberURL(m) // an address without one: memberTree says why
			t, err := s.memberTree(ctx, m)
			if err != nil {
				s.cfg.Logger.Debug("debug: member tree", "member", m.Name, "err", err)
				nodes[i+1] = failed(m.Name, err)
				nodes[i+1].DebugURL = base
				return
			}
			nodes[i+1] = NodeTree{Tree: t, DebugURL: base}
		})
	}
	wg.Wait()
	sort.SliceStable(nodes, func(i, j int) bool { return nodes[i].Node < nodes[j].Node })
	return ClusterTree{Self: local.Node, Nodes: nodes}, local.Node, states
}

// memberTree asks member m for its own tree.
func (s *Server) memberTree(ctx context.Context, m placement.Member) (actors.Tree, error) {
	body, u, err := s.memberGet(ctx, m, "/debug/tree", maxTreeBytes)
	if err != nil {
		return actors.Tree{}, err
	}
	var t actors.Tree
	if err := json.Unmarshal(body, &t); err != nil {
		return actors.Tree{}, fmt.Errorf("GET %s: not a tree: %w", u, err)
	}
	if t.Node != m.Name {
		return actors.Tree{}, fmt.Errorf("GET %s: answered as node %q, not %q", u, t.Node, m.Name)
	}
	return normalize(t), nil
}

// memberGet asks member m for path (with its query) on its debug
// endpoint and returns the body of a 200 answer of at most limit bytes,
// and the URL asked. The token goes only to members of authenticated
// gossip, and only over HTTPS when this endpoint serves HTTPS; a member it
// may not go to is not asked at all.
func (s *Server) memberGet(ctx context.Context, m placement.Member, path string, limit int64) ([]byte, string, error) {
	if s.cfg.Token != "" && !s.cfg.MembersAuthenticated {
		return nil, "", fmt.Errorf("member %s not asked: %w", m.Name, ErrMembersNotAuthenticated)
	}
	if s.cfg.Token != "" && s.tls != nil && !m.DebugTLS {
		return nil, "", fmt.Errorf("member %s not asked: %w", m.Name, ErrMemberPlainHTTP)
	}
	base, err := memberURL(m)
	if err != nil {
		return nil, "", err
	}
	u := base + path
	ctx, cancel := context.WithTimeout(ctx, s.cfg.FetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, u, fmt.Errorf("GET %s: %w", u, err)
	}
	req.Header.Set("Accept", "application/json")
	if s.cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+s.cfg.Token)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, u, err // names the method and URL already
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, u, fmt.Errorf("GET %s: read body: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, u, fmt.Errorf("GET %s: %s: %s", u, resp.Status, snippet(body))
	}
	if int64(len(body)) > limit {
		return nil, u, fmt.Errorf("GET %s: answer larger than %d bytes", u, limit)
	}
	return body, u, nil
}

// memberURL is the base URL of a member's debug endpoint: https when the
// member gossips that it serves TLS. A debug address without a host, or
// with an unspecified one (0.0.0.0, ::), means "every interface" of that
// member: the host of its gossip address reaches it.
func memberURL(m placement.Member) (string, error) {
	if m.DebugAddr == "" {
		return "", fmt.Errorf("member %s gossips no debug address", m.Name)
	}
	host, port, err := net.SplitHostPort(m.DebugAddr)
	if err != nil {
		return "", fmt.Errorf("member %s: debug address %q: %w", m.Name, m.DebugAddr, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		gh, _, err := net.SplitHostPort(m.Addr)
		if err != nil || gh == "" {
			return "", fmt.Errorf("member %s: debug address %q has no host and its gossip address %q gives none", m.Name, m.DebugAddr, m.Addr)
		}
		host = gh
	}
	scheme := "http://"
	if m.DebugTLS {
		scheme = "https://"
	}
	return scheme + net.JoinHostPort(host, port), nil
}

// snippet is the start of an error body, on one line.
func snippet(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "…"
	}
	if s == "" {
		s = "(empty body)"
	}
	return s
}
