package debug

import (
	"crypto/sha256"
	"encoding/base64"
	"regexp"
	"strings"
	"testing"

	"github.com/drover-dev/drover/actors"
)

// The page's CSP allows its own style and script elements by hash, and
// nothing inline besides: no 'unsafe-inline', so an injected script or an
// event handler attribute would not run (the browser test shows the page
// runs under it).
func TestPageCSPIsStrict(t *testing.T) {
	s := start(t, Config{Node: &fakeNode{trees: []actors.Tree{{Node: "n"}}}})
	r := get(t, "http://"+s.Addr()+"/debug/")
	csp := r.header.Get("Content-Security-Policy")
	if strings.Contains(csp, "unsafe") {
		t.Fatalf("CSP %q allows something unsafe", csp)
	}
	for _, el := range []string{"style", "script"} {
		if n := strings.Count(r.body, "<"+el); n != 1 {
			t.Fatalf("%d %s elements, want 1: the CSP hashes one", n, el)
		}
		body := r.body[strings.Index(r.body, "<"+el+">")+len(el)+2 : strings.Index(r.body, "</"+el+">")]
		sum := sha256.Sum256([]byte(body))
		want := el + "-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "';"
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if m := regexp.MustCompile(`(?i)<[^>]+\son[a-z]+\s*=|\beval\(|new Function|javascript:|style="`).FindString(r.body); m != "" {
		t.Errorf("the page has %q: inline handlers, eval and style attributes are refused by its CSP", m)
	}
	for _, want := range []string{`HISTORY_URL = "history"`, "fetch(HISTORY_URL", "data.gone", "not yet owned", "function unitControls", "function nodeControls"} {
		if !strings.Contains(r.body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if !strings.Contains(r.body, "<style>\n"+pageStyle+"</style>") || !strings.Contains(pageStyle, ".s-paused") {
		t.Errorf("the page's style element does not hold page.css")
	}
	if got := inlineHash("<p>no script</p>", "<script>", "</script>"); got != "'none'" {
		t.Errorf("a page without the element: %s, want 'none'", got)
	}
}
