package debug

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/actors/placement"
	"github.com/drover-dev/drover/cluster/metrics"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeNode serves trees[i] on its i-th call of Tree (the last one from
// then on), so a test can script what successive polls see.
type fakeNode struct {
	mu      sync.Mutex
	trees   []actors.Tree
	calls   int
	members []placement.Member
	ready   error
}

func (f *fakeNode) Tree() actors.Tree {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.trees[min(f.calls, len(f.trees)-1)]
	f.calls++
	return t
}

func (f *fakeNode) Members() []placement.Member {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.members)
}

func (f *fakeNode) Ready() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ready
}

func (f *fakeNode) setMembers(ms ...placement.Member) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.members = ms
}

func ts(s string) *time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return &t
}

// sampleTree is a node with one stream source of two units, one retrying.
func sampleTree(node string, units ...string) actors.Tree {
	src := actors.SourceStatus{Name: "orders", Type: "kafka", State: actors.StateRunning}
	for i, u := range units {
		us := actors.UnitStatus{Unit: u, Node: node, State: actors.StateRunning, LeaseToken: 7, LeaseExpiresAt: ts("2026-01-02T12:00:09Z"),
			Position: "1234", Lag: 0, Received: 1300, Applied: 1290, DeadLettered: 10, LastPullAt: ts("2026-01-02T12:00:01Z")}
		if i == 1 {
			us.State, us.LeaseToken, us.LastError, us.NextRetryAt = actors.StateRetrying, 2, "fetch: broker unreachable", ts("2026-01-02T12:00:03Z")
		}
		src.Units = append(src.Units, us)
	}
	return actors.Tree{Node: node, Members: []actors.MemberStatus{{Name: node, Addr: "127.0.0.1:7946", State: "alive"}}, Sources: []actors.SourceStatus{src}}
}

func start(t *testing.T, cfg Config) *Server {
	t.Helper()
	return startWith(t, cfg, func(*Server) {})
}

// startWith is start with f applied to the Server before Start.
func startWith(t *testing.T, cfg Config, f func(*Server)) *Server {
	t.Helper()
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.SampleEvery == 0 {
		// No background samples unless a test asks: they would call the
		// fake nodes' Tree, whose answers tests script by call.
		cfg.SampleEvery = -1
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	f(s)
	if err := s.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return s
}

type response struct {
	code   int
	header http.Header
	body   string
}

// get fetches url without keeping connections (no goroutines left behind).
func get(t *testing.T, url string, header ...string) response {
	t.Helper()
	return getWith(t, &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}, url, header...)
}

// getWith fetches url through c with the header's name, value pairs.
func getWith(t *testing.T, c *http.Client, url string, header ...string) response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{resp.StatusCode, resp.Header, string(b)}
}

// deadAddr is a loopback address nobody listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := ln.Addr().String()
	ln.Close()
	return a
}

func keys(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func TestNewRefusesANonLoopbackAddressWithoutAToken(t *testing.T) {
	node := &fakeNode{trees: []actors.Tree{{Node: "n"}}}
	for _, addr := range []string{"0.0.0.0:7070", ":7070", "10.1.2.3:7070", "[::]:7070", "example.com:7070"} {
		_, err := New(Config{Addr: addr, Node: node})
		if !errors.Is(err, ErrTokenRequired) || !strings.Contains(err.Error(), "node.debug_token") || !strings.Contains(err.Error(), addr) {
			t.Errorf("New(%q) without token: %v, want ErrTokenRequired naming node.debug_token and the address", addr, err)
		}
		if _, err := New(Config{Addr: addr, Node: node, Token: "t"}); err != nil {
			t.Errorf("New(%q) with token: %v", addr, err)
		}
	}
	for _, addr := range []string{"", "127.0.0.1:0", "127.9.9.9:7070", "[::1]:0", "localhost:7070"} {
		if _, err := New(Config{Addr: addr, Node: node}); err != nil {
			t.Errorf("New(%q) on loopback without token: %v", addr, err)
		}
	}
}

func TestNewNamesWhatIsWrong(t *testing.T) {
	node := &fakeNode{trees: []actors.Tree{{Node: "n"}}}
	for _, tt := range []struct {
		cfg  Config
		want string
	}{
		{Config{Addr: "127.0.0.1", Node: node}, `debug address "127.0.0.1"`},
		{Config{Addr: "127.0.0.1:http", Node: node}, `port "http" is not a number`},
		{Config{Addr: "127.0.0.1:70000", Node: node}, `port "70000" is not a number from 0 to 65535`},
		{Config{Addr: "127.0.0.1:0"}, "Config.Node is required"},
		{Config{Addr: "127.0.0.1:0", Node: node, FetchTimeout: -time.Second}, "FetchTimeout -1s is negative"},
	} {
		_, err := New(tt.cfg)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%+v) = %v, want an error containing %q", tt.cfg, err, tt.want)
		}
	}
}

func TestNodeTreeHasTheContractFieldNames(t *testing.T) {
	tree := sampleTree("node-1", "orders/0", "orders/3")
	tree.Sources = append(tree.Sources, actors.SourceStatus{Name: "jobs", Type: "sqs", State: actors.StateStarting}) // nil units
	s := start(t, Config{Node: &fakeNode{trees: []actors.Tree{tree}}})
	r := get(t, "http://"+s.Addr()+"/debug/tree")
	if r.code != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
		t.Fatalf("GET /debug/tree: %d %s %q", r.code, r.header.Get("Content-Type"), r.body)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(r.body), &got); err != nil {
		t.Fatalf("%v: %s", err, r.body)
	}
	if k := keys(got); !slices.Equal(k, []string{"members", "node", "sources"}) {
		t.Fatalf("tree keys %v", k)
	}
	member := got["members"].([]any)[0].(map[string]any)
	if k := keys(member); !slices.Equal(k, []string{"addr", "name", "state"}) {
		t.Fatalf("member keys %v", k)
	}
	sources := got["sources"].([]any)
	src := sources[0].(map[string]any)
	for _, k := range []string{"name", "type", "state", "units"} {
		if _, ok := src[k]; !ok {
			t.Fatalf("source has no %q: %v", k, keys(src))
		}
	}
	unit := src["units"].([]any)[1].(map[string]any)
	want := []string{"acked", "applied", "dead_lettered", "last_error", "last_error_at", "last_pull_at", "lag", "lag_seconds", "lease_expires_at", "lease_token",
		"next_retry_at", "node", "position", "received", "rejected", "restarts", "state", "unit"}
	sort.Strings(want)
	if k := keys(unit); !slices.Equal(k, want) {
		t.Fatalf("unit keys\n got %v\nwant %v", k, want)
	}
	if unit["unit"] != "orders/3" || unit["state"] != "retrying" || unit["last_error"] != "fetch: broker unreachable" || unit["next_retry_at"] != "2026-01-02T12:00:03Z" {
		t.Fatalf("unit %v", unit)
	}
	if !strings.Contains(r.body, `"name":"jobs","type":"sqs","state":"starting","units":[]`) {
		t.Fatalf("a source without units must have \"units\":[]: %s", r.body)
	}
}

func TestEmptyTreeHasEmptyListsNotNull(t *testing.T) {
	s := start(t, Config{Node: &fakeNode{trees: []actors.Tree{{Node: "lonely"}}}})
	if r := get(t, "http://"+s.Addr()+"/debug/tree"); r.body != `{"node":"lonely","members":[],"sources":[]}`+"\n" {
		t.Fatalf("body %q", r.body)
	}
	if r := get(t, "http://"+s.Addr()+"/debug/tree?scope=cluster"); r.body != `{"self":"lonely","nodes":[{"node":"lonely","members":[],"sources":[]}]}`+"\n" {
		t.Fatalf("cluster body %q", r.body)
	}
}

func TestClusterScopeMergesMembersAndListsTheSilentOnesWithTheirError(t *testing.T) {
	b := start(t, Config{Node: &fakeNode{trees: []actors.Tree{sampleTree("node-b", "orders/1")}}})
	// node-c is gone: nothing listens at its address.
	dead := deadAddr(t)
	// node-d answers with an error status.
	d := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "store down\nsecond line", http.StatusInternalServerError)
	}))
	defer d.Close()
	// node-e's address is now served by another node.
	e := start(t, Config{Node: &fakeNode{trees: []actors.Tree{{Node: "node-z"}}}})
	a := &fakeNode{trees: []actors.Tree{sampleTree("node-a", "orders/0")}}
	a.setMembers(
		placement.Member{Name: "node-e", Addr: "127.0.0.1:1", DebugAddr: e.Addr()},
		placement.Member{Name: "node-a", Addr: "127.0.0.1:1", DebugAddr: "127.0.0.1:1"}, // itself: not asked
		placement.Member{Name: "node-c", Addr: "127.0.0.1:1", DebugAddr: dead},
		placement.Member{Name: "node-b", Addr: "127.0.0.1:1", DebugAddr: b.Addr(), State: placement.StateLeaving},
		placement.Member{Name: "node-d", Addr: "127.0.0.1:1", DebugAddr: strings.TrimPrefix(d.URL, "http://")},
		placement.Member{Name: "node-f", Addr: "127.0.0.1:1"},
	)
	s := start(t, Config{Node: a})
	r := get(t, "http://"+s.Addr()+"/debug/tree?scope=cluster")
	if r.code != 200 {
		t.Fatalf("%d %s", r.code, r.body)
	}
	var got ClusterTree
	if err := json.Unmarshal([]byte(r.body), &got); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range got.Nodes {
		names = append(names, n.Node)
	}
	if !slices.Equal(names, []string{"node-a", "node-b", "node-c", "node-d", "node-e", "node-f"}) {
		t.Fatalf("nodes %v", names)
	}
	byName := map[string]NodeTree{}
	for _, n := range got.Nodes {
		byName[n.Node] = n
	}
	if n := byName["node-a"]; n.Error != "" || n.Sources[0].Units[0].Unit != "orders/0" {
		t.Errorf("node-a %+v", n)
	}
	if n := byName["node-b"]; n.Error != "" || len(n.Sources) != 1 || n.Sources[0].Units[0].Unit != "orders/1" || n.Sources[0].Units[0].Node != "node-b" {
		t.Errorf("node-b %+v", n)
	}
	for name, want := range map[string]string{
		"node-c": "http://" + dead + "/debug/tree",
		"node-d": "500 Internal Server Error: store down second line",
		"node-e": `answered as node "node-z", not "node-e"`,
		"node-f": "member node-f gossips no debug address",
	} {
		if n := byName[name]; !strings.Contains(n.Error, want) || len(n.Sources) != 0 || len(n.Members) != 0 {
			t.Errorf("%s: error %q, want it to contain %q; %+v", name, n.Error, want, n)
		}
	}
	// The page posts controls to the node that answered (Self) only, and
	// links every other member's own page (DebugURL).
	if got.Self != "node-a" {
		t.Errorf("self %q, want node-a", got.Self)
	}
	for name, want := range map[string]string{"node-a": "", "node-b": "http://" + b.Addr(), "node-c": "http://" + dead, "node-f": ""} {
		if n := byName[name]; n.DebugURL != want {
			t.Errorf("%s: debug_url %q, want %q", name, n.DebugURL, want)
		}
	}
	// The failed entries keep the Contract's lists, empty.
	if !strings.Contains(r.body, `{"node":"node-c","members":[],"sources":[],"error":"`) {
		t.Errorf("node-c entry not in the shape {node, members: [], sources: [], error}: %s", r.body)
	}
}

func TestClusterScopeGivesUpOnAMemberThatHangs(t *testing.T) {
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer hang.Close()
	defer close(release)
	a := &fakeNode{trees: []actors.Tree{{Node: "a"}}}
	a.setMembers(placement.Member{Name: "slow", DebugAddr: strings.TrimPrefix(hang.URL, "http://")})
	s := start(t, Config{Node: a, FetchTimeout: 100 * time.Millisecond})
	begin := time.Now()
	r := get(t, "http://"+s.Addr()+"/debug/tree?scope=cluster")
	took := time.Since(begin)
	var got ClusterTree
	if err := json.Unmarshal([]byte(r.body), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Nodes) != 2 || got.Nodes[1].Node != "slow" || !strings.Contains(got.Nodes[1].Error, "context deadline exceeded") {
		t.Fatalf("%s", r.body)
	}
	if took > 5*time.Second {
		t.Fatalf("cluster answer took %v with a 100ms fetch timeout", took)
	}
}

func TestTokenGuardsEveryRouteButProbes(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := start(t, Config{Token: "s3cret", Node: &fakeNode{trees: []actors.Tree{sampleTree("n", "orders/0")}}, Registry: reg})
	base := "http://" + s.Addr()
	if r := get(t, base+"/healthz"); r.code != 200 || r.body != "ok\n" {
		t.Fatalf("healthz without token: %d %q", r.code, r.body)
	}
	if r := get(t, base+"/readyz"); r.code != 200 || r.body != "ready\n" {
		t.Fatalf("readyz without token: %d %q", r.code, r.body)
	}
	for _, path := range []string{"/debug/tree", "/debug/tree?scope=cluster", "/debug/events", "/debug/events?scope=cluster", "/debug/", "/metrics", "/nope"} {
		for _, h := range [][]string{
			nil,
			{"Authorization", "Bearer wrong"},
			{"Authorization", "Bearer s3cret-and-more"},
			{"Authorization", "Basic s3cret"},
			{"Authorization", "s3cret"},
		} {
			r := get(t, base+path, h...)
			if r.code != http.StatusUnauthorized || !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") || !strings.Contains(r.body, "debug token") {
				t.Errorf("GET %s with %v: %d %q, want 401", path, h, r.code, r.body)
			}
		}
	}
	for _, path := range []string{"/debug/tree", "/debug/tree?scope=cluster", "/debug/events", "/debug/events?scope=cluster", "/debug/", "/metrics", "/readyz"} {
		if r := get(t, base+path, "Authorization", "Bearer s3cret"); r.code != 200 {
			t.Errorf("GET %s with the token: %d %q", path, r.code, r.body)
		}
		if r := get(t, base+path, "Authorization", "bearer  s3cret"); r.code != 200 {
			t.Errorf("GET %s with a lower-case scheme: %d %q", path, r.code, r.body)
		}
	}
	// A browser opens the page with the token in the URL; only the page takes it there.
	if r := get(t, base+"/debug/?token=s3cret"); r.code != 200 {
		t.Errorf("page with ?token: %d", r.code)
	}
	if r := get(t, base+"/debug/?token=nope"); r.code != 401 {
		t.Errorf("page with a wrong ?token: %d", r.code)
	}
	if r := get(t, base+"/debug/tree?token=s3cret"); r.code != 401 {
		t.Errorf("tree with ?token: %d, want 401 (query tokens are for the page only)", r.code)
	}
}

func TestClusterScopeForwardsTheToken(t *testing.T) {
	b := start(t, Config{Token: "shared", Node: &fakeNode{trees: []actors.Tree{sampleTree("b", "orders/1")}}})
	c := start(t, Config{Token: "other", Node: &fakeNode{trees: []actors.Tree{sampleTree("c", "orders/2")}}})
	a := &fakeNode{trees: []actors.Tree{sampleTree("a", "orders/0")}}
	a.setMembers(placement.Member{Name: "b", DebugAddr: b.Addr()}, placement.Member{Name: "c", DebugAddr: c.Addr()})
	s := start(t, Config{Token: "shared", Node: a, MembersAuthenticated: true})
	r := get(t, "http://"+s.Addr()+"/debug/tree?scope=cluster", "Authorization", "Bearer shared")
	var got ClusterTree
	if err := json.Unmarshal([]byte(r.body), &got); err != nil {
		t.Fatalf("%v: %s", err, r.body)
	}
	if len(got.Nodes) != 3 || got.Nodes[1].Error != "" || got.Nodes[1].Sources[0].Units[0].Unit != "orders/1" {
		t.Fatalf("b should answer with the forwarded token: %s", r.body)
	}
	if !strings.Contains(got.Nodes[2].Error, "401 Unauthorized") {
		t.Fatalf("c has another token and must refuse: %q", got.Nodes[2].Error)
	}
}

func TestReadyz(t *testing.T) {
	n := &fakeNode{trees: []actors.Tree{{Node: "n"}}, ready: errors.New("store: dial tcp 127.0.0.1:5432: connection refused")}
	s := start(t, Config{Node: n})
	if r := get(t, "http://"+s.Addr()+"/readyz"); r.code != 503 || r.body != "not ready: store: dial tcp 127.0.0.1:5432: connection refused\n" {
		t.Fatalf("readyz while not ready: %d %q", r.code, r.body)
	}
	n.mu.Lock()
	n.ready = nil
	n.mu.Unlock()
	if r := get(t, "http://"+s.Addr()+"/readyz"); r.code != 200 || r.body != "ready\n" {
		t.Fatalf("readyz: %d %q", r.code, r.body)
	}
	if r := get(t, "http://"+s.Addr()+"/healthz"); r.code != 200 || r.body != "ok\n" {
		t.Fatalf("healthz: %d %q", r.code, r.body)
	}
}

func TestMetricsServesTheConfiguredRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, "node-1", metrics.Options{PerUnit: true})
	m.Received("orders", "orders/0", 42)
	m.Lag("orders", "orders/0", actors.Lag{Messages: 3})
	s := start(t, Config{Node: &fakeNode{trees: []actors.Tree{{Node: "node-1"}}}, Registry: reg})
	r := get(t, "http://"+s.Addr()+"/metrics")
	if r.code != 200 || !strings.Contains(r.body, `drover_unit_received_total{node="node-1",source="orders",unit="orders/0"} 42`) {
		t.Fatalf("/metrics: %d\n%s", r.code, r.body)
	}
	// Without a registry /metrics still answers, empty.
	s2 := start(t, Config{Node: &fakeNode{trees: []actors.Tree{{Node: "n"}}}})
	if r := get(t, "http://"+s2.Addr()+"/metrics"); r.code != 200 || strings.Contains(r.body, "drover_") {
		t.Fatalf("/metrics without registry: %d %q", r.code, r.body)
	}
}

func TestBadRequests(t *testing.T) {
	s := start(t, Config{Node: &fakeNode{trees: []actors.Tree{{Node: "n"}}}})
	base := "http://" + s.Addr()
	if r := get(t, base+"/debug/tree?scope=planet"); r.code != 400 || !strings.Contains(r.body, `scope "planet": must be node or cluster`) {
		t.Errorf("bad scope: %d %q", r.code, r.body)
	}
	if r := get(t, base+"/debug/nothing"); r.code != 404 {
		t.Errorf("unknown path: %d", r.code)
	}
	if r := get(t, base+"/debug"); r.code != http.StatusMovedPermanently || r.header.Get("Location") != "/debug/" {
		t.Errorf("/debug: %d %q", r.code, r.header.Get("Location"))
	}
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Post(base+"/debug/tree", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /debug/tree: %d", resp.StatusCode)
	}
}

var externalURL = regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}|(src|href)\s*=|@import|url\(`)

func TestPageIsSelfContainedAndPolls(t *testing.T) {
	s := start(t, Config{Node: &fakeNode{trees: []actors.Tree{{Node: "n"}}}})
	r := get(t, "http://"+s.Addr()+"/debug/")
	if r.code != 200 || r.header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("GET /debug/: %d %q", r.code, r.header.Get("Content-Type"))
	}
	for _, want := range []string{`"tree?scope=cluster"`, "fetch(TREE_URL", "setTimeout(poll, POLL_MS)", "POLL_MS = 1000", "kill -9 &lt;pid&gt;", "drover demo --kill"} {
		if !strings.Contains(r.body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// One link is allowed: a member's own page (where its drain is
	// posted), made from the cluster tree's debug_url. A navigation the
	// user clicks, not a load; the CSP would refuse any load anyway.
	const memberLink = `a.href = n.debug_url + "/debug/";`
	if strings.Count(r.body, memberLink) != 1 {
		t.Errorf("page lacks the member link %q", memberLink)
	}
	if m := externalURL.FindString(strings.Replace(r.body, memberLink, "", 1)); m != "" {
		t.Errorf("page refers to something outside itself: %q", m)
	}
	if csp := r.header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "connect-src 'self'") {
		t.Errorf("CSP %q", csp)
	}
	for _, s := range []string{"starting", "acquiring", "running", "retrying", "paused", "stopping", "stopped", "error"} {
		if !strings.Contains(r.body, ".s-"+s+" ") {
			t.Errorf("no colour for state %s", s)
		}
	}
}

func TestMemberURL(t *testing.T) {
	for _, tt := range []struct {
		m       placement.Member
		want    string
		wantErr string
	}{
		{placement.Member{Name: "a", DebugAddr: "10.0.0.5:7070"}, "http://10.0.0.5:7070", ""},
		{placement.Member{Name: "a", DebugAddr: "[fd00::1]:7070"}, "http://[fd00::1]:7070", ""},
		{placement.Member{Name: "a", DebugAddr: "0.0.0.0:7070", Addr: "10.0.0.5:7946"}, "http://10.0.0.5:7070", ""},
		{placement.Member{Name: "a", DebugAddr: ":7070", Addr: "[fd00::2]:7946"}, "http://[fd00::2]:7070", ""},
		{placement.Member{Name: "a", DebugAddr: "[::]:7070", Addr: "10.0.0.5:7946"}, "http://10.0.0.5:7070", ""},
		{placement.Member{Name: "a", DebugAddr: ":7070"}, "", `member a: debug address ":7070" has no host`},
		{placement.Member{Name: "a", DebugAddr: "nohost"}, "", `member a: debug address "nohost"`},
		{placement.Member{Name: "a"}, "", "member a gossips no debug address"},
	} {
		got, err := memberURL(tt.m)
		if got != tt.want || (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("memberURL(%+v) = %q, %v; want %q, %q", tt.m, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestStartAndShutdown(t *testing.T) {
	s, err := New(Config{Addr: "127.0.0.1:0", Node: &fakeNode{trees: []actors.Tree{{Node: "n"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if s.Addr() != "" {
		t.Fatalf("Addr before Start = %q", s.Addr())
	}
	if err := s.Shutdown(t.Context()); err != nil {
		t.Fatalf("Shutdown before Start: %v", err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); !errors.Is(err, ErrStarted) {
		t.Fatalf("second Start: %v", err)
	}
	addr := s.Addr()
	if r := get(t, "http://"+addr+"/healthz"); r.code != 200 {
		t.Fatalf("healthz %d", r.code)
	}
	// Keep a connection open and idle: Shutdown must close it, not wait on it.
	keep := &http.Client{Transport: &http.Transport{}}
	resp, err := keep.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err := s.Shutdown(t.Context()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	keep.CloseIdleConnections()
	if err := s.Shutdown(t.Context()); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Fatalf("still listening on %s after Shutdown", addr)
	}
	// Another server can bind the same address at once.
	s2, err := New(Config{Addr: addr, Node: &fakeNode{trees: []actors.Tree{{Node: "n"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.Start(); err != nil {
		t.Fatalf("rebind %s: %v", addr, err)
	}
	if err := s2.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func TestStartNamesTheAddressItCannotBind(t *testing.T) {
	a := start(t, Config{Node: &fakeNode{trees: []actors.Tree{{Node: "a"}}}})
	s, err := New(Config{Addr: a.Addr(), Node: &fakeNode{trees: []actors.Tree{{Node: "b"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err == nil || !strings.Contains(err.Error(), "listen on "+a.Addr()) {
		t.Fatalf("Start on a busy address: %v", err)
	}
}

// Probes need no token, but only a caller with the token learns why the
// node is not ready.
func TestReadyzWithATokenHidesTheReason(t *testing.T) {
	n := &fakeNode{trees: []actors.Tree{{Node: "n"}}, ready: errors.New("store: dial tcp 10.0.0.9:5432: connection refused")}
	s := start(t, Config{Token: "s3cret", Node: n})
	if r := get(t, "http://"+s.Addr()+"/readyz"); r.code != 503 || r.body != "not ready\n" {
		t.Fatalf("readyz without token: %d %q", r.code, r.body)
	}
	if r := get(t, "http://"+s.Addr()+"/readyz", "Authorization", "Bearer s3cret"); r.code != 503 || !strings.Contains(r.body, "10.0.0.9") {
		t.Fatalf("readyz with token: %d %q", r.code, r.body)
	}
}
