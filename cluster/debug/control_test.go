package debug

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/actors"
)

type fakeController struct{ got []ControlRequest }

func (f *fakeController) Control(_ context.Context, req ControlRequest) (ControlReply, error) {
	f.got = append(f.got, req)
	switch req.Source {
	case "bad":
		return ControlReply{}, fmt.Errorf("%w: no source bad", ErrBadControl)
	case "busy":
		return ControlReply{}, fmt.Errorf("%w: draining", ErrControlConflict)
	}
	return ControlReply{Action: req.Action, Node: "n1", Detail: "done " + req.Source}, nil
}

func post(t *testing.T, url, body string, header ...string) response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 20 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{resp.StatusCode, resp.Header, string(b)}
}

func TestControlsTakeTheAdminTokenOnly(t *testing.T) {
	fc := &fakeController{}
	s := start(t, Config{Node: &fakeNode{trees: []actors.Tree{sampleTree("n1")}}, Token: "read", AdminToken: "admin", Controller: fc})
	u := "http://" + s.Addr() + "/debug/control/pause"
	js := "application/json"
	for _, c := range []struct {
		name   string
		header []string
		body   string
		code   int
	}{
		{"no token", []string{"Content-Type", js}, `{"source":"orders"}`, http.StatusUnauthorized},
		{"read token", []string{"Content-Type", js, "Authorization", "Bearer read"}, `{"source":"orders"}`, http.StatusUnauthorized},
		{"wrong token", []string{"Content-Type", js, "Authorization", "Bearer admin2"}, `{"source":"orders"}`, http.StatusUnauthorized},
		{"form body", []string{"Content-Type", "application/x-www-form-urlencoded", "Authorization", "Bearer admin"}, `source=orders`, http.StatusUnsupportedMediaType},
		{"other site", []string{"Content-Type", js, "Authorization", "Bearer admin", "Origin", "http://evil.example"}, `{"source":"orders"}`, http.StatusForbidden},
		{"unknown field", []string{"Content-Type", js, "Authorization", "Bearer admin"}, `{"sauce":"orders"}`, http.StatusBadRequest},
		{"two values", []string{"Content-Type", js, "Authorization", "Bearer admin"}, `{"source":"orders"}{"source":"x"}`, http.StatusBadRequest},
		{"too large", []string{"Content-Type", js, "Authorization", "Bearer admin"}, `{"source":"orders","reason":"` + strings.Repeat("x", maxControlBody) + `"}`, http.StatusRequestEntityTooLarge},
		{"long by", []string{"Content-Type", js, "Authorization", "Bearer admin"}, `{"source":"orders","by":"` + strings.Repeat("x", maxControlBy+1) + `"}`, http.StatusBadRequest},
		{"bad target", []string{"Content-Type", js, "Authorization", "Bearer admin"}, `{"source":"bad"}`, http.StatusBadRequest},
		{"conflict", []string{"Content-Type", js, "Authorization", "Bearer admin"}, `{"source":"busy"}`, http.StatusConflict},
		{"ok", []string{"Content-Type", js, "Authorization", "Bearer admin"}, `{"source":"orders","by":"ann","reason":"poison"}`, http.StatusOK},
	} {
		r := post(t, u, c.body, c.header...)
		if r.code != c.code {
			t.Errorf("%s: got %d %q, want %d", c.name, r.code, r.body, c.code)
		}
	}
	if len(fc.got) != 3 {
		t.Fatalf("controller called %d times, want 3 (bad, busy, ok): %+v", len(fc.got), fc.got)
	}
	last := fc.got[2]
	if last.Action != ActionPause || last.Source != "orders" || last.By != "ann" || last.Reason != "poison" {
		t.Errorf("controller got %+v", last)
	}
	// The read token still reads.
	if r := get(t, "http://"+s.Addr()+"/debug/tree", "Authorization", "Bearer read"); r.code != http.StatusOK {
		t.Errorf("tree with the read token: %d", r.code)
	}
}

func TestControlsFallBackToTheReadToken(t *testing.T) {
	fc := &fakeController{}
	s := start(t, Config{Node: &fakeNode{trees: []actors.Tree{sampleTree("n1")}}, Token: "read", Controller: fc})
	r := post(t, "http://"+s.Addr()+"/debug/control/resume", `{"source":"orders"}`, "Content-Type", "application/json", "Authorization", "Bearer read")
	if r.code != http.StatusOK || len(fc.got) != 1 || fc.got[0].Action != ActionResume {
		t.Fatalf("got %d %q, calls %+v", r.code, r.body, fc.got)
	}
	if r := post(t, "http://"+s.Addr()+"/debug/control/resume", `{}`, "Content-Type", "application/json"); r.code != http.StatusUnauthorized {
		t.Errorf("without a token: %d", r.code)
	}
}

func TestControlsWithoutAControllerAnswer501(t *testing.T) {
	s := start(t, Config{Node: &fakeNode{trees: []actors.Tree{sampleTree("n1")}}})
	if r := post(t, "http://"+s.Addr()+"/debug/control/drain", `{}`, "Content-Type", "application/json"); r.code != http.StatusNotImplemented {
		t.Errorf("got %d %q", r.code, r.body)
	}
}
