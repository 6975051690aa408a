package debug

import (
	_ "embed"
	"io"
	"net/http"
)

// pageHTML is the live cluster page: one self-contained file, inline CSS
// and JavaScript, no external assets. A string: immutable, so this package
// variable is constant data, not state.
//
//go:embed page.html
var pageHTML string

// pageCSP forbids the page anything but itself: inline style and script,
// and requests to its own origin (the poll).
const pageCSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

func (s *Server) page(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", pageCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	_, _ = io.WriteString(w, pageHTML)
}
