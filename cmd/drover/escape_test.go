package main

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEscapeTerminal(t *testing.T) {
	for _, c := range []struct {
		in        string
		multiline bool
		want      string
	}{
		{"plain text, ünïcödé, 日本", false, "plain text, ünïcödé, 日本"},
		{"a\nb\tc", true, "a\nb\tc"},
		{"a\nb\tc", false, `a\nb\tc`},
		{"\x1b[31mred\x1b[0m", true, `\x1b[31mred\x1b[0m`},
		{"\x00\x07\x7f", true, `\x00\x07\x7f`},
		{"\u0085\u009b\u009d", true, `\u0085\u009b\u009d`},
		{"\xff\x9b", true, `\xff\x9b`},
		{"\u200e\u200f\u061c\u2028\u2029", true, `\u200e\u200f\u061c\u2028\u2029`},
	} {
		if got := escapeTerminal(c.in, c.multiline); got != c.want {
			t.Errorf("escapeTerminal(%q, %v) = %q, want %q", c.in, c.multiline, got, c.want)
		}
	}
}

// A long payload is cut at a rune, never inside one (which would show as
// \x escapes of half a rune).
func TestPrintableCutsAtARune(t *testing.T) {
	p := []byte("x" + strings.Repeat("é", 40<<10)) // 1 + 80 KiB: the 64 KiB cut falls inside a rune
	out := printable(p)
	if strings.Contains(out, `\x`) || !utf8.ValidString(out) || !strings.HasSuffix(out, "… (truncated)") {
		t.Fatalf("cut inside a rune: ...%q", out[len(out)-40:])
	}
	if got := clipLine("ab"+strings.Repeat("é", 100), 81); strings.Contains(got, `\x`) || !strings.HasSuffix(got, "…") {
		t.Errorf("clipLine cut inside a rune: %q", got)
	}
}
