package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

// A node's tree (or, through the cluster view, any member's) carries
// names, positions and errors that others control: drover tree escapes
// terminal controls in them, in the text tree and in --json.
func TestTreeEscapesTerminalControls(t *testing.T) {
	var body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
	for _, h := range hostile {
		t.Run(h.name, func(t *testing.T) {
			// as encoding/json writes it (C0 escaped, the rest raw) and as a
			// hostile endpoint could (everything raw)
			for i, enc := range []string{jsonString(h.text), rawString(h.text)} {
				body = `{"node":"n` + enc + `","members":[],"sources":[{"name":"s","type":"kafka","state":"retrying","error":"e` + enc +
					`","units":[{"unit":"s/0","node":"n","state":"retrying","position":"p` + enc + `","last_error":"u` + enc + `"}]}]}`
				for _, args := range [][]string{{"tree", "--addr", srv.URL}, {"tree", "--addr", srv.URL, "--json"}} {
					code, out, errs := runCLI(t, args...)
					if code != 0 && !strings.Contains(errs, "did not answer") {
						t.Fatalf("%v: exit %d %s", args, code, errs)
					}
					if len(args) == 4 && i == 0 { // valid JSON stays valid, with the same content
						var got, want any
						if err := json.Unmarshal([]byte(out), &got); err != nil {
							t.Fatalf("--json output is no longer JSON: %v\n%q", err, out)
						}
						_ = json.Unmarshal([]byte(body), &want)
						if !reflect.DeepEqual(got, want) {
							t.Errorf("--json changed the tree:\n%v\n%v", got, want)
						}
					}
					if at, bad := terminalControl(out); bad {
						t.Errorf("%v: a terminal control reaches the output near %q:\n%q", args, at, out)
					}
					// (the text tree folds whitespace, a carriage return included)
					if len(args) == 3 && code == 0 && !strings.Contains(h.text, "\r") && !strings.Contains(out, "e"+h.shown) {
						t.Errorf("%v: the error is not shown as %s:\n%s", args, h.shown, out)
					}
				}
			}
		})
	}
}

// jsonString is s inside a JSON string as encoding/json writes it: C0
// controls escaped, every other rune as it is.
func jsonString(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < 0x20 {
			b.WriteString(`\u00`)
			b.WriteByte("0123456789abcdef"[r>>4])
			b.WriteByte("0123456789abcdef"[r&15])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// rawString is s as it is (not valid JSON when it holds a C0 control).
func rawString(s string) string { return s }
