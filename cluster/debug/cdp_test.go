package debug

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// browser is headless Chromium driven over the DevTools protocol on a
// pipe (--remote-debugging-pipe: the browser reads commands on fd 3 and
// writes answers on fd 4, each a JSON message ended by a NUL byte), with
// one page open: enough for a test to type, click and read like a person.
type browser struct {
	t       *testing.T
	w       io.Writer
	mu      sync.Mutex
	nextID  int
	waiting map[int]chan cdpMessage
	session string
}

type cdpMessage struct {
	ID     int             `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// openBrowser starts Chromium and opens url in a page of width×height.
func openBrowser(t *testing.T, url string, width, height int) *browser {
	t.Helper()
	needChromium(t)
	ctx, cancel := context.WithCancel(context.Background())
	cmdIn, toBrowser, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	fromBrowser, cmdOut, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	// The profile is a directory of our own, removed once every process
	// of the browser is gone: t.TempDir's removal raced the browser's
	// helpers still writing it.
	profile, err := os.MkdirTemp("", "drover-cdp-profile-")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--no-first-run", "--disable-dev-shm-usage", "--user-data-dir="+profile, "--hide-scrollbars",
		"--remote-debugging-pipe", "about:blank")
	cmd.Env = append(os.Environ(), "TZ=UTC")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its helpers in its group
	cmd.ExtraFiles = []*os.File{cmdIn, cmdOut}
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("chromium: %v", err)
	}
	_ = cmdIn.Close()
	_ = cmdOut.Close()
	b := &browser{t: t, w: toBrowser, waiting: map[int]chan cdpMessage{}}
	done := make(chan struct{})
	go b.read(fromBrowser, done)
	t.Cleanup(func() {
		// Ask the browser to close (it ends its helpers), wait for it a
		// while, then kill its whole group.
		b.mu.Lock()
		_, _ = b.w.Write(append([]byte(`{"id":1000000,"method":"Browser.close"}`), 0))
		b.mu.Unlock()
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			cancel()
			<-exited
		}
		cancel()
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // helpers left behind, if any
		_ = toBrowser.Close()
		<-done
		deadline := time.Now().Add(10 * time.Second)
		for err := os.RemoveAll(profile); err != nil; err = os.RemoveAll(profile) {
			if time.Now().After(deadline) {
				t.Errorf("remove the browser profile %s: %v", profile, err)
				return
			}
			time.Sleep(50 * time.Millisecond) // polling a condition (the helpers' exit) with a deadline
		}
	})
	var target struct {
		TargetID string `json:"targetId"`
	}
	b.call("Target.createTarget", map[string]any{"url": "about:blank"}, &target)
	var att struct {
		SessionID string `json:"sessionId"`
	}
	b.call("Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &att)
	b.session = att.SessionID
	b.call("Emulation.setDeviceMetricsOverride", map[string]any{"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}, nil)
	b.call("Page.navigate", map[string]any{"url": url}, nil)
	return b
}

// read hands each answer to the call waiting for its id; events are
// dropped.
func (b *browser) read(r io.ReadCloser, done chan struct{}) {
	defer close(done)
	defer r.Close()
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadBytes(0)
		if err != nil {
			return
		}
		var m cdpMessage
		if json.Unmarshal(line[:len(line)-1], &m) != nil || m.ID == 0 {
			continue
		}
		b.mu.Lock()
		ch := b.waiting[m.ID]
		delete(b.waiting, m.ID)
		b.mu.Unlock()
		if ch != nil {
			ch <- m
		}
	}
}

// call sends method with params to the page (to the browser before the
// page is attached) and decodes the result into out.
func (b *browser) call(method string, params any, out any) {
	b.t.Helper()
	b.mu.Lock()
	b.nextID++
	id := b.nextID
	ch := make(chan cdpMessage, 1)
	b.waiting[id] = ch
	msg := map[string]any{"id": id, "method": method, "params": params}
	if b.session != "" {
		msg["sessionId"] = b.session
	}
	body, err := json.Marshal(msg)
	if err == nil {
		_, err = b.w.Write(append(body, 0))
	}
	b.mu.Unlock()
	if err != nil {
		b.t.Fatalf("%s: %v", method, err)
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			b.t.Fatalf("%s: %s", method, m.Error.Message)
		}
		if out != nil {
			if err := json.Unmarshal(m.Result, out); err != nil {
				b.t.Fatalf("%s: result %s: %v", method, m.Result, err)
			}
		}
	case <-time.After(30 * time.Second):
		b.t.Fatalf("%s: no answer from chromium in 30 s", method)
	}
}

// eval is the value of the JavaScript expression expr in the page.
func (b *browser) eval(expr string, out any) {
	b.t.Helper()
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		Exception *struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
	}
	b.call("Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true}, &r)
	if r.Exception != nil {
		b.t.Fatalf("eval %s: %s", expr, r.Exception.Text)
	}
	if out != nil {
		if err := json.Unmarshal(r.Result.Value, out); err != nil {
			b.t.Fatalf("eval %s: value %s: %v", expr, r.Result.Value, err)
		}
	}
}

// waitTrue waits (30 s at most) until expr is true in the page.
func (b *browser) waitTrue(what, expr string) {
	b.t.Helper()
	ok := waitFor(30*time.Second, func() bool {
		var v bool
		b.eval("!!("+expr+")", &v)
		return v
	})
	if !ok {
		var dom string
		b.eval("document.body.outerHTML", &dom)
		b.t.Fatalf("waited 30 s for %s (%s); the page:\n%s", what, expr, dom)
	}
}

// click clicks, with the mouse, the middle of the first element that
// matches the CSS selector sel.
func (b *browser) click(sel string) {
	b.t.Helper()
	b.waitTrue(sel, fmt.Sprintf("document.querySelector(%q)", sel))
	var at struct{ X, Y float64 }
	b.eval(fmt.Sprintf(`(function(){var e=document.querySelector(%q);e.scrollIntoView({block:"center"});`+
		`var r=e.getBoundingClientRect();return {X:r.left+r.width/2,Y:r.top+r.height/2};})()`, sel), &at)
	for _, typ := range []string{"mousePressed", "mouseReleased"} {
		b.call("Input.dispatchMouseEvent", map[string]any{"type": typ, "x": at.X, "y": at.Y, "button": "left", "clickCount": 1}, nil)
	}
}

// typeInto clicks the element sel and types text, as keystrokes would.
func (b *browser) typeInto(sel, text string) {
	b.t.Helper()
	b.click(sel)
	b.call("Input.insertText", map[string]any{"text": text}, nil)
}

// screenshot is a PNG of the page's viewport.
func (b *browser) screenshot() []byte {
	b.t.Helper()
	var r struct {
		Data []byte `json:"data"` // base64 in the JSON
	}
	b.call("Page.captureScreenshot", map[string]any{"format": "png"}, &r)
	return r.Data
}
