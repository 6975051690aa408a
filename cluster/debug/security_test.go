package debug

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/actors/placement"
	"github.com/drover-dev/drover/internal/testpki"
)

// recorder is a member's debug endpoint that records the Authorization
// header of every request and answers with the tree of node name.
type recorder struct {
	srv   *httptest.Server
	mu    sync.Mutex
	auths []string
}

func newRecorder(t *testing.T, name string) *recorder {
	t.Helper()
	rec := &recorder{}
	rec.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.mu.Lock()
		rec.auths = append(rec.auths, r.Header.Get("Authorization"))
		rec.mu.Unlock()
		_ = json.NewEncoder(w).Encode(normalize(actors.Tree{Node: name}))
	}))
	t.Cleanup(rec.srv.Close)
	return rec
}

func (r *recorder) addr() string { return strings.TrimPrefix(r.srv.URL, "http://") }

func (r *recorder) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.auths...)
}

func clusterOf(t *testing.T, r response) map[string]NodeTree {
	t.Helper()
	if r.code != http.StatusOK {
		t.Fatalf("cluster view: %d %s", r.code, r.body)
	}
	var got ClusterTree
	if err := json.Unmarshal([]byte(r.body), &got); err != nil {
		t.Fatalf("%v: %s", err, r.body)
	}
	out := map[string]NodeTree{}
	for _, n := range got.Nodes {
		out[n.Node] = n
	}
	return out
}

// Issue 10, item 1: a member that joined plain gossip and advertises a
// debug address never receives the token: without authenticated gossip the
// cluster view asks no other member with it.
func TestClusterScopeSendsTheTokenOnlyToAuthenticatedMembers(t *testing.T) {
	intruder := newRecorder(t, "intruder")
	a := &fakeNode{trees: []actors.Tree{{Node: "a"}}}
	a.setMembers(placement.Member{Name: "a"}, placement.Member{Name: "intruder", Addr: "127.0.0.1:1", DebugAddr: intruder.addr()})

	plain := start(t, Config{Token: "s3cret", Node: a})
	for range 3 { // the page polls
		got := clusterOf(t, get(t, "http://"+plain.Addr()+"/debug/tree?scope=cluster", "Authorization", "Bearer s3cret"))
		if seen := intruder.seen(); len(seen) != 0 {
			t.Fatalf("a member of plain gossip was asked %d times, with Authorization %q", len(seen), seen)
		}
		if e := got["intruder"].Error; !strings.Contains(e, "member intruder not asked: gossip is not authenticated (no cluster.secret_key), so the debug token is sent to no other member") {
			t.Fatalf("intruder listed with error %q, want it to say why it was not asked", e)
		}
		if got["a"].Error != "" {
			t.Fatalf("this node's own tree: %+v", got["a"])
		}
	}

	// The recorder does see what is sent: with authenticated gossip the
	// member is asked with the token; without a token it is asked without.
	authed := start(t, Config{Token: "s3cret", Node: a, MembersAuthenticated: true})
	if got := clusterOf(t, get(t, "http://"+authed.Addr()+"/debug/tree?scope=cluster", "Authorization", "Bearer s3cret")); got["intruder"].Error != "" {
		t.Fatalf("authenticated member: %q", got["intruder"].Error)
	}
	open := start(t, Config{Node: a})
	if got := clusterOf(t, get(t, "http://"+open.Addr()+"/debug/tree?scope=cluster")); got["intruder"].Error != "" {
		t.Fatalf("member of a cluster without a token: %q", got["intruder"].Error)
	}
	if seen := intruder.seen(); len(seen) != 2 || seen[0] != "Bearer s3cret" || seen[1] != "" {
		t.Fatalf("member saw Authorization %q, want [\"Bearer s3cret\" \"\"]", seen)
	}
}

// getTLS is get over HTTPS, trusting roots.
func getTLS(t *testing.T, url string, roots *x509.CertPool, header ...string) response {
	t.Helper()
	return getWith(t, &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{RootCAs: roots}}}, url, header...)
}

// node.debug_tls: the endpoint serves HTTPS only; the cluster view asks
// members that gossip TLS over https, verified with the configured CA, and
// sends the token to no member over plain HTTP.
func TestDebugTLS(t *testing.T) {
	p := testpki.New(t, "cluster")
	stranger := testpki.New(t, "stranger") // signed by a CA nobody trusts
	b := start(t, Config{Token: "tok", Node: &fakeNode{trees: []actors.Tree{sampleTree("b", "orders/1")}}, TLSCert: p.Cert, TLSKey: p.Key})
	d := start(t, Config{Token: "tok", Node: &fakeNode{trees: []actors.Tree{{Node: "d"}}}, TLSCert: stranger.Cert, TLSKey: stranger.Key})
	plain := newRecorder(t, "c")
	a := &fakeNode{trees: []actors.Tree{{Node: "a"}}}
	a.setMembers(
		placement.Member{Name: "b", DebugAddr: b.Addr(), DebugTLS: true},
		placement.Member{Name: "c", DebugAddr: plain.addr()},
		placement.Member{Name: "d", DebugAddr: d.Addr(), DebugTLS: true},
	)
	s := start(t, Config{Token: "tok", Node: a, MembersAuthenticated: true, TLSCert: p.Cert, TLSKey: p.Key, TLSCA: p.CA})
	if s.URL() != "https://"+s.Addr()+"/debug/" {
		t.Errorf("URL() = %q", s.URL())
	}
	got := clusterOf(t, getTLS(t, "https://"+s.Addr()+"/debug/tree?scope=cluster", p.Pool, "Authorization", "Bearer tok"))
	if n := got["b"]; n.Error != "" || len(n.Sources) != 1 || n.Sources[0].Units[0].Unit != "orders/1" {
		t.Errorf("b over https: %+v", n)
	}
	if e := got["c"].Error; !strings.Contains(e, "member c not asked: its debug endpoint serves plain HTTP, and with node.debug_tls set the debug token goes only over HTTPS") {
		t.Errorf("c: %q", e)
	}
	if seen := plain.seen(); len(seen) != 0 {
		t.Errorf("a plain-HTTP member was asked by an HTTPS endpoint: %q", seen)
	}
	if e := got["d"].Error; !strings.Contains(e, "https://"+d.Addr()+"/debug/tree") || !strings.Contains(e, "certificate signed by unknown authority") {
		t.Errorf("d's certificate is not signed by node.debug_tls.ca: %q", e)
	}
	// The endpoint speaks nothing but TLS.
	if r := get(t, "http://"+s.Addr()+"/healthz"); r.code == http.StatusOK {
		t.Errorf("plain HTTP to an HTTPS endpoint: %d %q", r.code, r.body)
	}
	if r := getTLS(t, "https://"+s.Addr()+"/healthz", p.Pool); r.code != http.StatusOK {
		t.Errorf("healthz over https: %d", r.code)
	}
}

func TestDebugTLSFilesNamedWhenUnusable(t *testing.T) {
	p, other := testpki.New(t, "a"), testpki.New(t, "b")
	keyPEM, err := os.ReadFile(p.Key)
	if err != nil {
		t.Fatal(err)
	}
	node := &fakeNode{trees: []actors.Tree{{Node: "n"}}}
	missing := filepath.Join(t.TempDir(), "missing.pem")
	for _, tt := range []struct {
		cfg  Config
		want string
	}{
		{Config{TLSCert: p.Cert}, "node.debug_tls: cert and key go together"},
		{Config{TLSKey: p.Key}, "node.debug_tls: cert and key go together"},
		{Config{TLSCert: missing, TLSKey: p.Key}, "node.debug_tls.cert: stat " + missing},
		{Config{TLSCert: p.Cert, TLSKey: missing}, "node.debug_tls.key: stat " + missing},
		{Config{TLSCert: p.Cert, TLSKey: other.Key}, "node.debug_tls: certificate " + p.Cert + " with key " + other.Key + ": tls: private key does not match public key"},
		{Config{TLSCert: p.Key, TLSKey: p.Key}, "node.debug_tls: certificate " + p.Key},
		{Config{TLSCA: p.Key}, "node.debug_tls.ca: " + p.Key + " holds no PEM certificate"},
		{Config{TLSCA: missing}, "node.debug_tls.ca: stat " + missing},
		{Config{TLSCA: "/dev/zero"}, "node.debug_tls.ca: /dev/zero is not a regular file"},
		{Config{TLSCert: t.TempDir(), TLSKey: p.Key}, "is not a regular file"},
	} {
		tt.cfg.Addr, tt.cfg.Node = "127.0.0.1:0", node
		_, err := New(tt.cfg)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%+v) = %v, want an error containing %q", tt.cfg, err, tt.want)
			continue
		}
		if body := strings.Split(string(keyPEM), "\n")[1]; strings.Contains(err.Error(), body) {
			t.Errorf("error quotes the private key: %v", err)
		}
	}
}

// fetch is get for other goroutines: it returns its error.
func fetch(ctx context.Context, url string) (response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return response{}, err
	}
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return response{resp.StatusCode, resp.Header, string(b)}, err
}

// closedConns reports, through connState, when the server has closed the
// connection from a client address.
type closedConns struct {
	mu     sync.Mutex
	closed map[string]bool
}

func (c *closedConns) hook(conn net.Conn, st http.ConnState) {
	if st == http.StateClosed || st == http.StateHijacked {
		c.mu.Lock()
		if c.closed == nil {
			c.closed = map[string]bool{}
		}
		c.closed[conn.RemoteAddr().String()] = true
		c.mu.Unlock()
	}
}

func (c *closedConns) has(addr string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed[addr]
}

// waitFor polls cond until it holds or d passes.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// Issue 10, item 2: a client that sends its request body a byte at a
// time (slow loris) is cut off after ReadTimeout.
func TestSlowLorisBodyIsCutOff(t *testing.T) {
	var cc closedConns
	s := startWith(t, Config{Node: &fakeNode{trees: []actors.Tree{{Node: "n"}}}, ReadTimeout: 300 * time.Millisecond}, func(s *Server) { s.connState = cc.hook })
	conn, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /debug/tree HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	trickled := make(chan struct{})
	go func() { // one byte every 20 ms: the whole body would take half an hour
		defer close(trickled)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := conn.Write([]byte("x")); err != nil {
					return
				}
			}
		}
	}()
	defer func() { close(stop); <-trickled }()
	if !waitFor(10*time.Second, func() bool { return cc.has(conn.LocalAddr().String()) }) {
		t.Fatal("the server still reads a body trickled a byte at a time after 10s (ReadTimeout 300ms)")
	}
}

// Issue 10, item 2: a client that reads nothing of a large answer does not
// hold the handler: the write gives up after WriteTimeout.
func TestSlowReaderIsCutOff(t *testing.T) {
	big := actors.Tree{Node: "n"}
	src := actors.SourceStatus{Name: "orders", Type: "kafka", State: actors.StateRunning}
	for i := range 40000 {
		src.Units = append(src.Units, actors.UnitStatus{Unit: fmt.Sprintf("orders/%d", i), Node: "n", State: actors.StateRunning, LastError: strings.Repeat("e", 100)})
	}
	big.Sources = []actors.SourceStatus{src}
	var cc closedConns
	s := startWith(t, Config{Node: &fakeNode{trees: []actors.Tree{big}}, WriteTimeout: 300 * time.Millisecond}, func(s *Server) { s.connState = cc.hook })
	conn, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(4096)
	if _, err := io.WriteString(conn, "GET /debug/tree HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if !waitFor(10*time.Second, func() bool { return cc.has(conn.LocalAddr().String()) }) {
		t.Fatal("the server still writes to a client that reads nothing after 10s (WriteTimeout 300ms)")
	}
}

// Issue 10, item 2: concurrent cluster views share one fan-out: however
// many come while one is in flight, each member is asked once.
func TestConcurrentClusterViewsShareOneFanOut(t *testing.T) {
	release := make(chan struct{})
	var asked atomic.Int64
	member := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		_ = json.NewEncoder(w).Encode(normalize(actors.Tree{Node: "b"}))
	}))
	defer member.Close()
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	a := &fakeNode{trees: []actors.Tree{{Node: "a"}}}
	a.setMembers(placement.Member{Name: "b", DebugAddr: strings.TrimPrefix(member.URL, "http://")})
	s := start(t, Config{Node: a, FetchTimeout: 20 * time.Second})

	const views = 6
	results := make(chan response, views)
	var wg sync.WaitGroup
	for range views {
		wg.Go(func() { // no t.Fatal off the test's goroutine
			r, err := fetch(t.Context(), "http://"+s.Addr()+"/debug/tree?scope=cluster")
			if err != nil {
				t.Errorf("cluster view: %v", err)
			}
			results <- r
		})
	}
	if !waitFor(10*time.Second, func() bool { return asked.Load() >= 1 && s.waiters.Load() == views-1 }) {
		t.Fatalf("%d cluster views in flight: the member was asked %d times and %d views wait on the one in flight; want 1 and %d",
			views, asked.Load(), s.waiters.Load(), views-1)
	}
	close(release)
	released = true
	wg.Wait()
	close(results)
	for r := range results {
		if r.code == 0 {
			continue // reported above
		}
		if got := clusterOf(t, r); got["b"].Error != "" || len(got) != 2 {
			t.Errorf("shared answer: %s", r.body)
		}
	}
	if n := asked.Load(); n != 1 {
		t.Errorf("the member was asked %d times for %d concurrent views, want 1", n, views)
	}
	// The next view after the shared one asks again.
	if got := clusterOf(t, get(t, "http://"+s.Addr()+"/debug/tree?scope=cluster")); got["b"].Error != "" || asked.Load() != 2 {
		t.Errorf("a later view: asked %d times, %+v", asked.Load(), got["b"])
	}
}

func TestNewRefusesNegativeTimeouts(t *testing.T) {
	node := &fakeNode{trees: []actors.Tree{{Node: "n"}}}
	for _, c := range []Config{{ReadTimeout: -1}, {ReadHeaderTimeout: -1}, {WriteTimeout: -1}, {IdleTimeout: -1}} {
		c.Node = node
		if _, err := New(c); err == nil || !strings.Contains(err.Error(), "is negative") {
			t.Errorf("New(%+v) = %v", c, err)
		}
	}
	s, err := New(Config{Node: node})
	if err != nil {
		t.Fatal(err)
	}
	if c := s.cfg; c.ReadTimeout != DefaultReadTimeout || c.ReadHeaderTimeout != DefaultReadHeaderTimeout ||
		c.WriteTimeout != DefaultFetchTimeout+DefaultWriteMargin || c.IdleTimeout != DefaultIdleTimeout {
		t.Errorf("defaults: read %v, header %v, write %v, idle %v", c.ReadTimeout, c.ReadHeaderTimeout, c.WriteTimeout, c.IdleTimeout)
	}
}
