package debug

import (
	"net/http"
	"testing"

	"github.com/drover-dev/drover/actors"
)

// A loopback endpoint without tokens took any control
// from a DNS-rebound page (its Origin and Host are the attacker's name,
// so sameOrigin passed, and the browser sends JSON without a preflight).
func TestRebindingPageCannotControlATokenlessEndpoint(t *testing.T) {
	fc := &fakeController{}
	s := start(t, Config{Node: &fakeNode{trees: []actors.Tree{sampleTree("n1")}}, Controller: fc})
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+s.Addr()+"/debug/control/exit", nil)
	req.Host = "evil.example:" + s.Addr()[len("127.0.0.1:"):]
	req.Header.Set("Origin", "http://"+req.Host)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK || len(fc.got) != 0 {
		t.Fatalf("a page of evil.example, rebound to 127.0.0.1, carried out %+v (%d)", fc.got, resp.StatusCode)
	}
}

// The same page cannot read the tree of such an endpoint either.
func TestRebindingPageCannotReadATokenlessEndpoint(t *testing.T) {
	s := start(t, Config{Node: &fakeNode{trees: []actors.Tree{sampleTree("n1")}}})
	for _, host := range []string{"evil.example:" + s.Addr()[len("127.0.0.1:"):], "localhost.evil.example"} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+s.Addr()+"/debug/tree", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("GET /debug/tree for Host %s: %d, want 403", host, resp.StatusCode)
		}
	}
	for _, host := range []string{s.Addr(), "localhost:1", "[::1]:7070"} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+s.Addr()+"/debug/tree", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET /debug/tree for Host %s: %d, want 200", host, resp.StatusCode)
		}
	}
}
