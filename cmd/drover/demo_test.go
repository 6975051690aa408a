package main

import (
	"strings"
	"testing"
)

// --chaos refuses, with exit 2 and before starting anything, what it
// cannot do.
func TestDemoChaosRefusesWhatItCannotDo(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--chaos", "1m", "--store", "sqlite:" + dir + "/x.db"}, "needs a networked store"},
		{[]string{"--chaos", "1m", "--duration", "10s"}, "drop --duration"},
		{[]string{"--chaos", "1m", "--kill", "node-2@3s"}, "drop --kill"},
		{[]string{"--chaos", "-1s"}, "must be positive"},
	} {
		code, _, errs := runCLI(t, append([]string{"demo", "--dir", dir}, tc.args...)...)
		if code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("demo %v: exit %d, stderr %q; want exit 2 and %q", tc.args, code, errs, tc.want)
		}
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:s3cret@h:5432/d?sslmode=disable": "postgres://u:xxxxx@h:5432/d?sslmode=disable",
		"postgres://u@h/d?password=s3cret":             "postgres://u@h/d?password=xxxxx",
		"sqlite:/tmp/drover.db":                        "sqlite:/tmp/drover.db",
	} {
		if got := redactURL(in); got != want {
			t.Errorf("redactURL(%q) = %q, want %q", in, got, want)
		}
	}
}
