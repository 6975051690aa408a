package node

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/actors/placement"
	"github.com/drover-dev/drover/cluster/config"
	"github.com/drover-dev/drover/cluster/debug"
	"github.com/drover-dev/drover/cluster/gossip"
	"github.com/drover-dev/drover/internal/testpki"
)

// Issue 10, item 1: a process that joins a node's plain (loopback) gossip
// and advertises a debug address it serves never receives the debug token
// from the cluster view; with cluster.secret_key a member that joined holds
// the key, and is asked with the token.
func TestGossipIntruderNeverGetsTheDebugToken(t *testing.T) {
	key := make([]byte, gossip.SecretKeySize)
	for i := range key {
		key[i] = byte(i + 1)
	}
	for _, tt := range []struct {
		name      string
		secretKey []byte
		want      string // the Authorization the member's endpoint sees; "" none
	}{
		{"plain gossip", nil, ""},
		{"encrypted gossip", key, "Bearer tok-e2e"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var seen []string
			joiner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				seen = append(seen, r.Header.Get("Authorization"))
				mu.Unlock()
				_ = json.NewEncoder(w).Encode(actors.Tree{Node: "joiner", Members: []actors.MemberStatus{}, Sources: []actors.SourceStatus{}})
			}))
			defer joiner.Close()

			env := map[string]string{"TOK": "tok-e2e", "KEY": base64.StdEncoding.EncodeToString(key)}
			cl := `bind: "127.0.0.1:0", profile: fast`
			if tt.secretKey != nil {
				cl = `bind: "127.0.0.1:0", profile: fast, secret_key: "${env:KEY}"`
			}
			n := startNode(t, memoryNodeYAML(`debug_addr: "127.0.0.1:0", debug_token: "${env:TOK}"`, cl, t.TempDir(), 2),
				config.Options{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
			defer n.Close()
			var self string
			for _, m := range n.Members() {
				if m.Name == "n1" {
					self = m.Addr
				}
			}
			intruder, err := gossip.Join(t.Context(), gossip.Config{Name: "joiner", Bind: "127.0.0.1:0", Join: []string{self}, Profile: gossip.ProfileFast,
				SecretKey: tt.secretKey, DebugAddr: strings.TrimPrefix(joiner.URL, "http://"), Capacity: 1e9})
			if err != nil {
				t.Fatal(err)
			}
			defer leave(intruder)
			deadline := time.Now().Add(10 * time.Second)
			for !hasMember(n.Members(), "joiner") {
				if time.Now().After(deadline) {
					t.Fatalf("n1 does not see the joiner: %v", n.Members())
				}
				time.Sleep(10 * time.Millisecond)
			}

			for range 3 { // the page polls every second
				view := clusterView(t, "http://"+n.DebugAddr()+"/debug/tree?scope=cluster", "tok-e2e")
				got := view["joiner"]
				mu.Lock()
				leaked := tt.want == "" && len(seen) != 0
				mu.Unlock()
				if leaked {
					t.Fatalf("a member of plain gossip was asked, with Authorization %q", seen)
				}
				switch {
				case tt.want == "" && !strings.Contains(got.Error, debug.ErrMembersNotAuthenticated.Error()):
					t.Fatalf("joiner listed with %q, want an error saying gossip is not authenticated", got.Error)
				case tt.want != "" && got.Error != "":
					t.Fatalf("joiner of encrypted gossip: %q", got.Error)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if tt.want == "" && len(seen) != 0 {
				t.Fatalf("a member of plain gossip was asked %d times, with Authorization %q", len(seen), seen)
			}
			if tt.want != "" && (len(seen) != 3 || seen[0] != tt.want) {
				t.Fatalf("a member of encrypted gossip saw Authorization %q, want %q three times", seen, tt.want)
			}
		})
	}
}

// leave leaves gossip, giving it five seconds.
func leave(m *gossip.Membership) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = m.Leave(ctx)
}

// Review of issue 10, item 1: cluster.max_capacity reaches placement. A
// member that joins plain (loopback) gossip and advertises capacity 1e9
// counts as max_capacity (2 here, against n1's 1): n1 keeps at least
// 24 - (ceil(24·2/3) + 1) = 7 of 24 units. Were the option not passed on,
// placement would clamp to the default 16 and leave n1 at most
// ceil(24/17) + 1 = 3.
func TestMaxCapacityBoundsAGreedyMember(t *testing.T) {
	n := startNode(t, memoryNodeYAML(`debug_addr: "127.0.0.1:0"`, `bind: "127.0.0.1:0", profile: fast, max_capacity: 2`, t.TempDir(), 24), config.Options{})
	defer n.Close()
	running := func() []string {
		var us []string
		for _, s := range n.Tree().Sources {
			for _, u := range s.Units {
				us = append(us, u.Unit)
			}
		}
		slices.Sort(us)
		return us
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: n1 runs %v, sees %v", what, running(), n.Members())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// Alone, n1 runs every unit: that is the unit set.
	var units []string
	waitFor("n1 alone runs all 24 units", func() bool { units = running(); return len(units) == 24 })

	var self string
	for _, m := range n.Members() {
		if m.Name == "n1" {
			self = m.Addr
		}
	}
	// Sources nil: taken to run every source, so it is placed units.
	greedy, err := gossip.Join(t.Context(), gossip.Config{Name: "greedy", Bind: "127.0.0.1:0", Join: []string{self}, Profile: gossip.ProfileFast, Capacity: 1e9})
	if err != nil {
		t.Fatal(err)
	}
	defer leave(greedy)
	waitFor("n1 sees the greedy member", func() bool { return hasMember(n.Members(), "greedy") })

	var want []string
	waitFor("n1 runs what placement with max_capacity 2 gives it", func() bool {
		want = placement.Owned("n1", units, n.Members(), 2)
		return slices.Equal(running(), want)
	})
	if len(want) < 7 {
		t.Fatalf("n1 keeps %d of 24 units beside a member gossiping 1e9 with max_capacity 2, want at least 7: %v", len(want), want)
	}
	if d := placement.Owned("n1", units, n.Members(), placement.DefaultMaxCapacity); len(d) > 3 {
		t.Fatalf("with the default clamp n1 would keep %d units, want at most 3: the case does not tell the two apart", len(d))
	}
}

func hasMember(ms []placement.Member, name string) bool {
	for _, m := range ms {
		if m.Name == name {
			return true
		}
	}
	return false
}

func clusterView(t *testing.T, url, token string) map[string]debug.NodeTree {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 20 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v %s", url, resp.StatusCode, err, b)
	}
	var ct debug.ClusterTree
	if err := json.Unmarshal(b, &ct); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	out := map[string]debug.NodeTree{}
	for _, nt := range ct.Nodes {
		out[nt.Node] = nt
	}
	return out
}

// node.debug_tls is wired: the endpoint serves HTTPS with the configured
// certificate and the node gossips that it does; unusable files stop the
// node before it joins, naming the field.
func TestNodeDebugTLS(t *testing.T) {
	dir := t.TempDir()
	p := testpki.New(t, "n1")
	certFile, keyFile, roots := p.Cert, p.Key, p.Pool
	start := func(tls string) (*Node, error) {
		cfg := parseConfig(t, memoryNodeYAML(`debug_addr: "127.0.0.1:0", debug_tls: `+tls, `bind: "127.0.0.1:0", profile: fast`, dir, 1), config.Options{})
		return Start(t.Context(), cfg, Options{})
	}
	if _, err := start(`{cert: "` + dir + `/missing.pem", key: "` + keyFile + `"}`); err == nil || !strings.Contains(err.Error(), "node.debug_tls.cert: stat "+dir+"/missing.pem") {
		t.Fatalf("start with a missing certificate: %v", err)
	}
	n, err := start(`{cert: "` + certFile + `", key: "` + keyFile + `", ca: "` + p.CA + `"}`)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if !n.member.Local().DebugTLS {
		t.Error("the node does not gossip that its debug endpoint serves TLS")
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{RootCAs: roots}}}
	resp, err := c.Get("https://" + n.DebugAddr() + "/healthz")
	if err != nil {
		t.Fatalf("healthz over https: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz over https: %d", resp.StatusCode)
	}
}
