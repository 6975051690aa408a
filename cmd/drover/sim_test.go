package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

var lastLine = regexp.MustCompile(`^seed=(\d+) digest=([0-9a-f]{16}) applied=(\d+) lost=(\d+) duplicated=(\d+)$`)

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func lines(s string) []string { return strings.Split(strings.TrimRight(s, "\n"), "\n") }

func TestSimPrintsTheSameLastLineTwice(t *testing.T) {
	c1, o1, e1 := runCLI(t, "sim", "--seed", "7")
	c2, o2, _ := runCLI(t, "sim", "--seed", "7")
	if c1 != 0 || c2 != 0 {
		t.Fatalf("exit %d/%d: %s %s", c1, c2, o1, e1)
	}
	l1, l2 := lines(o1), lines(o2)
	last := l1[len(l1)-1]
	m := lastLine.FindStringSubmatch(last)
	if m == nil || m[1] != "7" || m[4] != "0" || m[5] != "0" || m[3] == "0" {
		t.Fatalf("last line %q", last)
	}
	if last != l2[len(l2)-1] {
		t.Fatalf("two runs of seed 7: %q vs %q", last, l2[len(l2)-1])
	}
}

func TestSimRunsPrintsOneLinePerSeed(t *testing.T) {
	code, out, errs := runCLI(t, "sim", "--seed", "3", "--runs", "4")
	if code != 0 {
		t.Fatalf("exit %d: %s %s", code, out, errs)
	}
	ls := lines(out)
	if len(ls) != 4 {
		t.Fatalf("want 4 lines, got %q", out)
	}
	for i, l := range ls {
		m := lastLine.FindStringSubmatch(l)
		if m == nil || m[1] != []string{"3", "4", "5", "6"}[i] {
			t.Fatalf("line %d: %q", i, l)
		}
	}
}

func TestSimFailsLoudlyWhenAnInvariantBreaks(t *testing.T) {
	// with fencing off, some seeds apply a message twice;
	// which ones depends on the scheduling, so look at all of them. Group
	// commit is held off, as it was when these seeds were picked: drawn per
	// seed it moves the few that break (seed 20 off, 40 on, none of the 50
	// when drawn; TestSimCatchesBrokenFencing looks at 200 drawn seeds).
	// Since runs also draw a drain (issue 13) seed 20 no longer breaks,
	// seed 55 did; since they draw a start bound, a seek expiry, a wire
	// stream and a kpl stream (issues 12-14), seed 79 does among 71-90
	// (and 146 further on), none of 1-60.
	code, out, errs := runCLI(t, "sim", "--seed", "71", "--runs", "20", "--break-fencing", "--group-commit", "off")
	if code != 1 {
		t.Fatalf("exit %d, want 1: %s", code, out)
	}
	broken := 0
	ls := lines(out)
	for i, l := range ls {
		m := lastLine.FindStringSubmatch(l)
		if m == nil || m[4] == "0" && m[5] == "0" {
			continue
		}
		broken++
		// above a broken run's line: its invariants and a replay hint
		above := strings.Join(ls[max(0, i-40):i], "\n")
		if !strings.Contains(above, "invariant broken: ") || !strings.Contains(above, "replay: drover sim --seed "+m[1]) {
			t.Fatalf("seed %s: no invariant or replay hint above its line:\n%s", m[1], above)
		}
	}
	if broken == 0 {
		t.Fatalf("no seed reported a broken invariant:\n%s", out)
	}
	if !strings.Contains(errs, "broke an invariant") {
		t.Fatalf("stderr %q", errs)
	}
}

func TestBadUsageExitsTwo(t *testing.T) {
	for _, args := range [][]string{{"sim", "--runs", "0"}, {"sim", "--store", "oracle"}, {"nosuch"}} {
		if code, _, errs := runCLI(t, args...); code != 2 || errs == "" {
			t.Errorf("%v: exit %d, stderr %q", args, code, errs)
		}
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := runCLI(t, "version")
	if code != 0 || !strings.HasPrefix(out, "drover ") {
		t.Fatalf("exit %d %q", code, out)
	}
}
