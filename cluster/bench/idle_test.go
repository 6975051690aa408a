package bench

import "testing"

// The idle figure is the median of its RSS samples.
func TestMedianMax(t *testing.T) {
	for _, c := range []struct {
		in          []int64
		median, max int64
	}{
		{[]int64{5}, 5, 5},
		{[]int64{9, 1, 5}, 5, 9},
		{[]int64{4, 8, 2, 6}, 4, 8}, // the lower middle of an even count
	} {
		if m, x := medianMax(c.in); m != c.median || x != c.max {
			t.Errorf("medianMax(%v) = %d, %d; want %d, %d", c.in, m, x, c.median, c.max)
		}
	}
}
