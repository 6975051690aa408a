package main

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Text that producers control (a dead letter's key, payload and reason,
// its position) reaches the operator's terminal through `drover dlq`. A
// terminal acts on some of it: ESC starts a sequence that can clear the
// screen (ESC[2J), set the window title (OSC 0) or write the clipboard
// (OSC 52), an 8-bit C1 byte does the same on some terminals, a carriage
// return overwrites what was written, and bidirectional overrides reorder
// what is shown. The human output writes every such rune as an escape
// instead (\x1b, \r, \u202e), always: also to a pipe or a file, since a
// pipe often ends in a terminal (| less -R, | tee). --json escapes through
// encoding/json; `dlq show --raw` writes the payload's bytes as they are,
// and only when stdout is not a terminal.

// escapeTerminal returns s with each rune a terminal could act on (see
// unsafeRune) and each byte that is not UTF-8 written as a Go escape. With
// multiline, newlines and tabs stay as they are.
func escapeTerminal(s string, multiline bool) string {
	if isSafe(s, multiline) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unsafeRune(r, multiline):
			b.WriteString(escapeRune(r))
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func isSafe(s string, multiline bool) bool {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n == 1) || unsafeRune(r, multiline) {
			return false
		}
		i += n
	}
	return true
}

// unsafeRune: the C0 controls (newline and tab allowed with multiline),
// DEL, the C1 controls U+0080 to U+009F, the bidirectional embeddings,
// overrides and isolates (U+202A to U+202E, U+2066 to U+2069) and marks
// (U+200E, U+200F, U+061C), and the line and paragraph separators U+2028
// and U+2029.
func unsafeRune(r rune, multiline bool) bool {
	switch {
	case multiline && (r == '\n' || r == '\t'):
		return false
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	case r == 0x200e, r == 0x200f, r == 0x061c, r == 0x2028, r == 0x2029:
		return true
	}
	return false
}

func escapeRune(r rune) string {
	switch r {
	case '\n':
		return `\n`
	case '\r':
		return `\r`
	case '\t':
		return `\t`
	}
	if r < 0x80 {
		return fmt.Sprintf(`\x%02x`, r)
	}
	return fmt.Sprintf(`\u%04x`, r)
}

// escapeJSON writes each rune of JSON text (the encoder's output, or a
// debug endpoint's body) that a terminal acts on as a \u escape, and each
// byte that is not UTF-8 as \ufffd. Inside a string every such rune is
// escaped (JSON allows \u escapes there, and a raw control is not valid
// JSON); outside strings the whitespace between tokens (space, newline,
// tab, carriage return) stays and anything else unsafe is escaped (not
// valid JSON either). encoding/json escapes the C0 controls itself but
// writes DEL, the C1 controls and the bidirectional overrides as they are.
func escapeJSON(b []byte) []byte {
	var out []byte
	inString, escaped := false, false
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		bad := r == utf8.RuneError && n == 1
		keep := !bad && !unsafeRune(r, false)
		switch {
		case bad:
		case inString && escaped:
			escaped = false
		case inString && r == '\\':
			escaped = true
		case r == '"':
			inString = !inString
		case !inString && (r == '\n' || r == '\r' || r == '\t'):
			keep = true
		}
		if keep {
			if out != nil {
				out = append(out, b[i:i+n]...)
			}
			i += n
			continue
		}
		if out == nil {
			out = append(make([]byte, 0, len(b)+16), b[:i]...)
		}
		if bad {
			r = utf8.RuneError
		}
		out = fmt.Appendf(out, `\u%04x`, r)
		i += n
	}
	if out == nil {
		return b
	}
	return out
}

// terminalWriter escapes what is written through it for the terminal
// (escapeTerminal, newlines and tabs kept). Each Write must hold whole
// runes, as fmt's do.
type terminalWriter struct{ w io.Writer }

func (t terminalWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(t.w, escapeTerminal(string(p), true)); err != nil {
		return 0, err
	}
	return len(p), nil
}
