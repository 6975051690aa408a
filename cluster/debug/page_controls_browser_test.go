package debug

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/actors/placement"
)

// pausingController records the controls it is given and, for a pause
// of a unit, makes the node's next trees show that unit paused, as a
// node's controls table would.
type pausingController struct {
	node *fakeNode
	mu   sync.Mutex
	got  []ControlRequest
}

func (p *pausingController) Control(_ context.Context, req ControlRequest) (ControlReply, error) {
	p.mu.Lock()
	p.got = append(p.got, req)
	p.mu.Unlock()
	if req.Action != ActionPause || req.Unit == "" {
		return ControlReply{}, fmt.Errorf("%w: this test pauses units only", ErrControlConflict)
	}
	tree := withUnits("node-a", "orders/0", "orders/1")
	for i, u := range tree.Sources[0].Units {
		if u.Unit == req.Unit {
			tree.Sources[0].Units[i].State = actors.StatePaused
		}
	}
	p.node.setTree(tree)
	return ControlReply{Action: req.Action, Node: "node-a", Detail: "paused " + req.Unit + " <b>as asked</b>"}, nil
}

func (p *pausingController) requests() []ControlRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]ControlRequest(nil), p.got...)
}

// Issue 13, item 9: the page's controls. In headless Chromium the test
// clicks pause on a unit without a token (the page asks for it and posts
// nothing), types the admin token and a reason, clicks pause again, and
// sees the unit paused (its own colour, a resume button) and the reply's
// detail as text, not HTML. The token is then nowhere: not in the address,
// the DOM, an input or the tab's storage. node-b's column links node-b's
// own page for drain. The screenshot goes to
// $DROVER_PAGE_CONTROLS_SCREENSHOT when set (the lead looks at it), else
// to a temporary directory.
func TestPageControlsPauseAUnitInHeadlessChromium(t *testing.T) {
	needChromium(t)
	const readToken, adminToken = "page-token", "admin-secret-42"
	b := start(t, Config{Token: readToken, Node: &fakeNode{trees: []actors.Tree{withUnits("node-b", "orders/2")}}})
	a := &fakeNode{trees: []actors.Tree{withUnits("node-a", "orders/0", "orders/1")}}
	a.setMembers(placement.Member{Name: "node-a", DebugAddr: "127.0.0.1:1"}, placement.Member{Name: "node-b", DebugAddr: b.Addr()})
	ctl := &pausingController{node: a}
	s := start(t, Config{Token: readToken, AdminToken: adminToken, Node: a, MembersAuthenticated: true, Controller: ctl})

	br := openBrowser(t, "http://"+s.Addr()+"/debug/?token="+readToken, 1500, 820)
	pause := `[data-node="node-a"] .card[data-unit="orders/0"] button[data-action="pause"]`
	br.click(pause)
	br.waitTrue("the page to ask for the token", `document.getElementById("ctlmsg").textContent.indexOf("type the admin token") >= 0`)
	if got := ctl.requests(); len(got) != 0 {
		t.Fatalf("a control without a token was posted: %+v", got)
	}

	br.typeInto("#ctoken", adminToken)
	br.typeInto("#creason", "test: hold orders/0")
	br.click(pause)
	card := `document.querySelector('[data-node="node-a"] .card[data-unit="orders/0"]')`
	br.waitTrue("orders/0 paused", card+`.classList.contains("s-paused") && `+card+`.querySelector(".st").textContent === "paused" && `+
		card+`.querySelector('button[data-action="resume"]')`)
	var msg string
	br.eval(`document.getElementById("ctlmsg").textContent`, &msg)
	if msg != "pause orders/0: paused orders/0 <b>as asked</b>" {
		t.Errorf("reply shown as %q, want the detail as text", msg)
	}
	var bolds int
	br.eval(`document.querySelectorAll("#ctlmsg b").length`, &bolds)
	if bolds != 0 {
		t.Errorf("the reply's detail was injected as HTML")
	}
	got := ctl.requests()
	if len(got) != 1 || got[0] != (ControlRequest{Action: ActionPause, Source: "orders", Unit: "orders/0", Reason: "test: hold orders/0"}) {
		t.Fatalf("controls posted: %+v", got)
	}
	var other bool
	br.eval(`document.querySelector('[data-node="node-a"] .card[data-unit="orders/1"]').classList.contains("s-running")`, &other)
	if !other {
		t.Errorf("orders/1 should still be running")
	}

	// A seek the node refuses: the small form under the header, and the
	// error's text shown.
	br.click(`[data-node="node-a"] .card[data-unit="orders/1"] button[data-action="seek"]`)
	br.waitTrue("the seek form", `!document.getElementById("cseek").hidden && document.getElementById("cseekunit").textContent === "orders/1"`)
	br.typeInto("#cseekto", "after:1200")
	br.click("#cseekgo")
	br.waitTrue("the seek's error", `document.getElementById("ctlmsg").className === "bad"`)
	br.eval(`document.getElementById("ctlmsg").textContent`, &msg)
	if want := "seek orders/1: 409 control conflicts with the node's state: this test pauses units only"; msg != want {
		t.Errorf("error shown as %q, want %q", msg, want)
	}
	if got := ctl.requests(); len(got) != 2 || got[1] != (ControlRequest{Action: ActionSeek, Source: "orders", Unit: "orders/1", To: "after:1200", Reason: "test: hold orders/0"}) {
		t.Fatalf("controls posted: %+v", got)
	}

	// The token: kept in the page's memory only.
	var where struct{ URL, DOM, Inputs, Storage string }
	br.eval(`({URL: location.href, DOM: document.documentElement.outerHTML,
		Inputs: Array.from(document.querySelectorAll("input")).map(function (i) { return i.value; }).join(" "),
		Storage: JSON.stringify(Object.assign({}, sessionStorage)) + JSON.stringify(Object.assign({}, localStorage))})`, &where)
	for name, v := range map[string]string{"address": where.URL, "DOM": where.DOM, "inputs": where.Inputs, "storage": where.Storage} {
		if strings.Contains(v, adminToken) {
			t.Errorf("the admin token is in the page's %s: %s", name, v)
		}
	}
	if strings.Contains(where.URL, readToken) {
		t.Errorf("the read token stayed in the address: %s", where.URL)
	}
	for _, want := range []string{`data-action="drain">drain</button>`, `data-action="undrain"`, `data-action="seek"`, "pause source", "resume source"} {
		if !strings.Contains(where.DOM, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	var link string
	br.eval(`document.querySelector('[data-node="node-b"] .head .ctls a').href`, &link)
	if link != "http://"+b.Addr()+"/debug/" {
		t.Errorf("node-b's drain link %q, want its own page", link)
	}
	var legend string
	br.eval(`document.getElementById("legend").textContent`, &legend)
	if !strings.Contains(legend, "paused") {
		t.Errorf("the legend lacks paused: %q", legend)
	}

	shot := os.Getenv("DROVER_PAGE_CONTROLS_SCREENSHOT")
	if shot == "" {
		shot = filepath.Join(t.TempDir(), "page-controls.png")
	}
	png := br.screenshot()
	if !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Fatalf("screenshot is not a PNG (%d bytes)", len(png))
	}
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", shot)
}
