package main

import (
	"strings"
	"testing"
)

// Issue 10, item 9: `drover sim --runs 9000000000000000000` panicked
// (makeslice), and seed+runs could wrap around.
func TestSimBoundsRunsAndSeeds(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"sim", "--runs", "9000000000000000000"}, "--runs 9000000000000000000: must be between 1 and 1000000"},
		{[]string{"sim", "--runs", "1000001"}, "--runs 1000001: must be between 1 and 1000000"},
		{[]string{"sim", "--runs", "-3"}, "--runs -3: must be between 1 and 1000000"},
		{[]string{"sim", "--seed", "18446744073709551615", "--runs", "2"}, "the last seed would pass 18446744073709551615"},
		{[]string{"sim", "--seed", "18446744073709551000", "--runs", "1000"}, "the last seed would pass"},
		{[]string{"sim", "--runs", "99999999999999999999"}, "--runs"},
	} {
		code, _, errs := runCLI(t, c.args...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errs, c.want)
		}
	}
	// the last seed itself is a seed
	code, out, errs := runCLI(t, "sim", "--seed", "18446744073709551614", "--runs", "2")
	if code != 0 || !strings.Contains(out, "seed=18446744073709551614 ") || !strings.Contains(out, "seed=18446744073709551615 ") {
		t.Fatalf("the two highest seeds: exit %d\n%s%s", code, out, errs)
	}
}

// More runs than one chunk still print one line per seed, in seed order.
func TestSimPrintsRunsInOrderAcrossChunks(t *testing.T) {
	defer func(n int) { simChunk = n }(simChunk)
	simChunk = 1 // chunks of GOMAXPROCS runs
	code, out, errs := runCLI(t, "sim", "--seed", "100", "--runs", "9")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	ls := lines(out)
	if len(ls) != 9 {
		t.Fatalf("%d lines, want 9", len(ls))
	}
	for i, l := range ls {
		m := lastLine.FindStringSubmatch(l)
		if m == nil || m[1] != itoa(int64(100+i)) {
			t.Fatalf("line %d: %q", i, l)
		}
	}
}
