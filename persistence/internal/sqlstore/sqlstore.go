package sqlstore

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// CheckTimeout reports a Config.Timeout t below min; 0 (the default def)
// is accepted.
func CheckTimeout(t, min, def time.Duration) error {
	if t != 0 && t < min {
		return fmt.Errorf("timeout %s: must be at least %s (or 0 for the default %s)", t, min, def)
	}
	return nil
}

// Timeout is the bound of a Config.Timeout t: t, or def where t is 0.
func Timeout(t, def time.Duration) time.Duration {
	if t == 0 {
		return def
	}
	return t
}

// WantUnits checks InitSource's arguments and returns the units to record:
// sorted, without repeats, never nil.
func WantUnits(source string, units []string) ([]string, error) {
	if source == "" {
		return nil, errors.New("init source: empty source")
	}
	want := slices.Compact(slices.Sorted(slices.Values(units)))
	if want == nil {
		want = []string{}
	}
	return want, nil
}

// GotUnits is InitSource's answer from the units a store read back:
// sorted (in place), never nil.
func GotUnits(got []string) []string {
	if got == nil {
		got = []string{}
	}
	slices.Sort(got)
	return got
}
