package brokers

import (
	"testing"
	"time"
)

func TestComparePositions(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "0", -1},
		{"0", "", 1},
		{"3", "3", 0},
		{"9", "10", -1}, // by value, not as text
		{"10", "9", 1},
		{"007", "7", 0}, // leading zeros do not count
		{"0", "00", 0},
		{"18446744073709551615", "18446744073709551616", -1}, // past uint64
		{"99999999999999999999", "100000000000000000000", -1},
		{ // Kinesis sequence numbers: 56 digits
			"49590338271490256608559692538361571095921575989136588898",
			"49590338271490256608559692538361571095921575989136588899", -1},
		{"5", "a", -1}, // decimal before text
		{"99999999999999999999", "1a", -1},
		{"-1", "0", 1}, // a sign makes it text
		{"", "a", -1},
		{"ab", "abc", -1}, // text against text
		{"b", "abc", 1},
		// start markers: after the empty position, before every other
		{"", MarkerBeginning, -1},
		{MarkerBeginning, "0", -1},
		{"@at:2026-01-01T00:00:00Z", "0", -1},
		{"@at:2026-01-01T00:00:00Z", "a", -1},
		{MarkerBeginning, "@at:2026-01-01T00:00:00Z", 1}, // as text among markers
		// sub-positions (a user record inside a KPL aggregate)
		{"7/0", "7/1", -1},
		{"7/9", "7/10", -1}, // the index by value
		{"7/01", "7/1", 0},
		{"7/3", "7", -1}, // the whole record is after each of its user records
		{"7/99", "8", -1},
		{"6", "7/0", -1},
		{"10/0", "9/5", 1}, // the number before the slash by value first
		{"49590338271490256608559692538361571095921575989136588898/4",
			"49590338271490256608559692538361571095921575989136588899", -1},
		{"@at:2026-01-01T00:00:00Z", "0/0", -1},
		{"7/0", "a", -1}, // text after
		{"7/", "7/0", 1}, // not a sub-position: text
		{"/0", "0", 1},
		{"7/0/1", "8", 1},
	}
	for _, tt := range tests {
		if got := ComparePositions(tt.a, tt.b); got != tt.want {
			t.Errorf("ComparePositions(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if got := ComparePositions(tt.b, tt.a); got != -tt.want {
			t.Errorf("ComparePositions(%q, %q) = %d, want %d", tt.b, tt.a, got, -tt.want)
		}
	}
}

func TestStartPositionRoundTrip(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 123456789, time.UTC)
	for _, s := range []Start{{After: "41"}, {Mode: Earliest}, {At: at}} {
		pos := StartPosition(s)
		got, ok := ParseStart(pos)
		if !ok || got.After != s.After || !got.At.Equal(s.At) || got.Mode != s.Mode {
			t.Errorf("ParseStart(StartPosition(%+v) = %q) = %+v, %v", s, pos, got, ok)
		}
		if want := s.After; Applied(pos) != want {
			t.Errorf("Applied(%q) = %q, want %q", pos, Applied(pos), want)
		}
		if (s.After == "") != IsMarker(pos) {
			t.Errorf("IsMarker(%q) = %v", pos, IsMarker(pos))
		}
	}
	if _, ok := ParseStart("@from-the-future"); ok {
		t.Error("an unknown marker parsed")
	}
	if s, ok := ParseStart(""); !ok || s != (Start{Mode: Earliest}) {
		t.Errorf(`ParseStart("") = %+v, %v`, s, ok)
	}
}

func TestSplitPosition(t *testing.T) {
	for _, tt := range []struct {
		in  string
		pos string
		sub int
	}{
		{"7/3", "7", 3},
		{"49590338271490256608559692538361571095921575989136588898/0", "49590338271490256608559692538361571095921575989136588898", 0},
		{"7", "7", -1},
		{"7/", "7/", -1},
		{"7/x", "7/x", -1},
		{"@at:x/1", "@at:x/1", -1},
		{"", "", -1},
	} {
		if pos, sub := SplitPosition(tt.in); pos != tt.pos || sub != tt.sub {
			t.Errorf("SplitPosition(%q) = %q, %d, want %q, %d", tt.in, pos, sub, tt.pos, tt.sub)
		}
	}
	if got := SubPosition("12", 4); got != "12/4" {
		t.Errorf("SubPosition = %q", got)
	}
}
