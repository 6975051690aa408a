package debug

import (
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"io"
	"net/http"
	"strings"
)

// pageHTML is the live cluster page: one self-contained document, inline
// CSS and JavaScript, no external assets. Its source is page.html with an
// empty style element that page.css fills (two files only to keep each
// short). A string: immutable, so this package variable is constant data,
// not state.
var pageHTML = strings.Replace(pageSource, "<style></style>", "<style>\n"+pageStyle+"</style>", 1)

var (
	//go:embed page.html
	pageSource string
	//go:embed page.css
	pageStyle string
)

// pageCSP forbids the page anything but itself: its one style element and
// its one script element, allowed by their SHA-256 (no 'unsafe-inline':
// no other inline script, no event handler attribute, no eval), and
// requests to its own origin (the polls). Computed once from the embedded
// page: constant data like pageHTML.
var pageCSP = "default-src 'none'; style-src " + inlineHash(pageHTML, "<style>", "</style>") +
	"; script-src " + inlineHash(pageHTML, "<script>", "</script>") +
	"; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// inlineHash is the CSP source of the first element of html that opens
// with open and closes with end: 'sha256-…' of its text, as browsers hash
// it; 'none' when html has no such element.
func inlineHash(html, open, end string) string {
	_, rest, ok := strings.Cut(html, open)
	if !ok {
		return "'none'"
	}
	body, _, ok := strings.Cut(rest, end)
	if !ok {
		return "'none'"
	}
	sum := sha256.Sum256([]byte(body))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

func (s *Server) page(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", pageCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	_, _ = io.WriteString(w, pageHTML)
}
