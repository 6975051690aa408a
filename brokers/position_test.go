package brokers

import "testing"

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
