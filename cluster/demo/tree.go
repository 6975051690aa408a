package demo

// The cluster tree as the debug endpoint shows it, and convergence on it.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/drover-dev/drover/actors"
)

// ClusterTree is the JSON of /debug/tree?scope=cluster.
type ClusterTree struct {
	Nodes []NodeTree `json:"nodes"`
}

// NodeTree is one node's tree, or its error.
type NodeTree struct {
	actors.Tree
	Error string `json:"error,omitempty"`
}

// Tree asks a running node for the cluster tree.
func (c *Cluster) Tree(ctx context.Context) (ClusterTree, error) {
	var last error
	for _, n := range c.nodes {
		if !n.Running() {
			continue
		}
		t, err := GetTree(ctx, n.DebugAddr, true)
		if err == nil {
			return t, nil
		}
		last = err
	}
	if last == nil {
		last = errors.New("no node is running")
	}
	return ClusterTree{}, last
}

// GetTree fetches a node's tree (or the cluster's) from its debug address.
func GetTree(ctx context.Context, addr string, cluster bool) (ClusterTree, error) {
	url := "http://" + addr + "/debug/tree"
	if cluster {
		url += "?scope=cluster"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return ClusterTree{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ClusterTree{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return ClusterTree{}, fmt.Errorf("%s: %s: %s", url, resp.Status, strings.TrimSpace(string(b)))
	}
	if cluster {
		var t ClusterTree
		return t, json.NewDecoder(resp.Body).Decode(&t)
	}
	var t NodeTree
	err = json.NewDecoder(resp.Body).Decode(&t)
	return ClusterTree{Nodes: []NodeTree{t}}, err
}

// Owners maps each unit to the nodes listing it (in any state), from a
// cluster tree.
func (t ClusterTree) Owners() map[string][]string {
	out := map[string][]string{}
	for _, n := range t.Nodes {
		for _, s := range n.Sources {
			for _, u := range s.Units {
				out[u.Unit] = append(out[u.Unit], n.Node)
			}
		}
	}
	for _, v := range out {
		sort.Strings(v)
	}
	return out
}

// Holders maps each unit to the nodes that hold it: running, retrying,
// paused or stopping with a lease token.
func (t ClusterTree) Holders() map[string][]string {
	out := map[string][]string{}
	for _, n := range t.Nodes {
		for _, s := range n.Sources {
			for _, u := range s.Units {
				switch u.State {
				case actors.StateRunning, actors.StateRetrying, actors.StatePaused, actors.StateStopping:
					if u.LeaseToken > 0 {
						out[u.Unit] = append(out[u.Unit], n.Node)
					}
				}
			}
		}
	}
	return out
}

// Running maps each unit in state running to its node.
func (t ClusterTree) Running() map[string]string {
	out := map[string]string{}
	for _, n := range t.Nodes {
		for _, s := range n.Sources {
			for _, u := range s.Units {
				if u.State == actors.StateRunning {
					out[u.Unit] = n.Node
				}
			}
		}
	}
	return out
}

// Units is every unit id of the demo's sources and of the added ones.
func (c *Cluster) Units() []string {
	var out []string
	for _, src := range append([]string{"orders"}, c.auditSources()...) {
		for p := 0; p < c.cfg.Partitions; p++ {
			out = append(out, fmt.Sprintf("%s/%d", src, p))
		}
	}
	for p := 0; p < AvroPartitions; p++ {
		out = append(out, fmt.Sprintf("%s/%d", AvroTopic, p))
	}
	for _, q := range queueSources {
		for i := 0; i < q.slots; i++ {
			out = append(out, fmt.Sprintf("%s/slot-%d", q.name, i))
		}
	}
	return out
}

// Converged reports whether every unit is running on exactly one node and
// listed by no other.
func (c *Cluster) Converged(t ClusterTree) bool {
	owners, running := t.Owners(), t.Running()
	for _, u := range c.Units() {
		if len(owners[u]) != 1 || running[u] == "" {
			return false
		}
	}
	return true
}

// WaitConverged polls the cluster tree until Converged or ctx ends.
func (c *Cluster) WaitConverged(ctx context.Context) (ClusterTree, error) {
	var last error
	for {
		t, err := c.Tree(ctx)
		if err == nil && c.Converged(t) {
			return t, nil
		}
		if err != nil {
			last = err
		} else {
			last = fmt.Errorf("not converged: %d of %d units running once", len(t.Running()), len(c.Units()))
		}
		select {
		case <-ctx.Done():
			return t, fmt.Errorf("demo: cluster did not converge: %v", last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
