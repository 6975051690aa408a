package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// drover reload against an endpoint that answers a reload carried out in
// part (500 with the reply, as debug.ErrControlIncomplete is answered):
// it prints what was applied and what not, and exits 1; --json prints the
// reply. A reload's default --timeout outlasts the node's reload.
func TestReloadIncompleteExitsOneSayingWhatApplied(t *testing.T) {
	const reply = `{"action":"reload","node":"n1","detail":"reload incomplete: added new; still stopping stuck; error: remove source stuck: still stopping after 2m0s","result":{"ok":false,"added":["new"],"stopping":["stuck"]}}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.URL.Path != "/debug/control/reload" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, reply+"\n")
	}))
	defer srv.Close()
	code, out, errs := runCLI(t, "reload", "--addr", srv.URL)
	if code != 1 || !strings.Contains(out, "n1: reload incomplete: added new; still stopping stuck") || !strings.Contains(errs, "not carried out in full") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	code, out, _ = runCLI(t, "reload", "--addr", srv.URL, "--json")
	if code != 1 || !strings.Contains(out, `"stopping":["stuck"]`) {
		t.Errorf("--json: exit %d, stdout %q", code, out)
	}
	if f := newControls()[len(newControls())-1]; f.Name() != "reload" || f.Flag("timeout").DefValue != "3m10s" {
		t.Errorf("%s --timeout default %s, want 3m10s", f.Name(), f.Flag("timeout").DefValue)
	}
}
