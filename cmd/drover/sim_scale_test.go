package main

import (
	"strings"
	"testing"
)

// `drover sim --scale` prints its table: a row per scenario, the summary
// line last, the same for a seed but for the two placement CPU columns.
func TestSimScaleTable(t *testing.T) {
	run := func() []string {
		t.Helper()
		code, out, errs := runCLI(t, "sim", "--scale", "--nodes", "4", "--units", "60", "--sources", "3", "--seed", "5")
		if code != 0 {
			t.Fatalf("exit %d\n%s%s", code, out, errs)
		}
		if !strings.Contains(errs, "took ") {
			t.Errorf("stderr %q: want the time the run took", errs)
		}
		ls := lines(out)
		if len(ls) != 8 || !strings.HasPrefix(ls[1], "scenario ") {
			t.Fatalf("want parameters, header, 4 rows, placement and summary lines:\n%s", out)
		}
		if m := lastLine.FindStringSubmatch(ls[7]); m == nil || m[1] != "5" || !strings.Contains(ls[7], " lost=0 duplicated=0") {
			t.Fatalf("last line %q", ls[7])
		}
		var rows []string
		for i, name := range []string{"cold-start", "kill-1", "join-1", "rolling-restart"} {
			f := strings.Fields(ls[2+i])
			if len(f) != 11 || f[0] != name {
				t.Fatalf("row %d: %q, want %s and 10 figures", i, ls[2+i], name)
			}
			rows = append(rows, strings.Join(f[:9], " ")) // without the CPU columns
		}
		return append(rows, ls[0], ls[7])
	}
	a, b := run(), run()
	if strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Fatalf("two runs of seed 5 differ:\n%s\n--\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
	}
}

func TestSimScaleFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"sim", "--nodes", "10"}, "--nodes needs --scale"},
		{[]string{"sim", "--units", "10"}, "--units needs --scale"},
		{[]string{"sim", "--scale", "--runs", "2"}, "--runs does not go with --scale"},
		{[]string{"sim", "--scale", "--store", "sqlite"}, "--store does not go with --scale"},
		{[]string{"sim", "--scale", "--nodes", "1"}, "--nodes 1: must be between 2 and 1000"},
		{[]string{"sim", "--scale", "--nodes", "5000"}, "--nodes 5000: must be between 2 and 1000"},
		{[]string{"sim", "--scale", "--sources", "0"}, "--sources 0: must be between 1 and 1000"},
		{[]string{"sim", "--scale", "--units", "3", "--sources", "4"}, "--units 3: must be between --sources (4) and 1000000"},
		{[]string{"sim", "--scale", "--units", "2000000"}, "--units 2000000"},
	} {
		code, _, errs := runCLI(t, c.args...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errs, c.want)
		}
	}
}
