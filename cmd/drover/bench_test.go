package main

import (
	"strings"
	"testing"
)

// Bad flags exit 2 naming the flag, before anything starts.
func TestBenchRefusesBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--partitions", "0"}, "--partitions"},
		{[]string{"--partitions", "5000"}, "--partitions"},
		{[]string{"--messages", "-1"}, "--messages"},
		{[]string{"--keys", "0"}, "--keys"},
		{[]string{"--batch", "10001"}, "--batch"},
		{[]string{"--payload", "10"}, "--payload"},
		{[]string{"--max-wait", "0s"}, "--max-wait"},
		{[]string{"--rate", "-3"}, "--rate"},
		{[]string{"--latency-for", "-1s"}, "--latency-for"},
		{[]string{"--nodes", "-1"}, "--nodes"},
		{[]string{"--store", "mysql://h/db"}, "--store"},
		{[]string{"--store", "postgres://"}, "--store"},
		{[]string{"--compare-partitions", "64"}, "--compare-partitions"},
		{[]string{"--compare-partitions", "64,x"}, "--compare-partitions"},
		{[]string{"--compare-partitions", "0,64"}, "--compare-partitions"},
		{[]string{"--idle", "-1"}, "--idle"},
		{[]string{"--idle", "10", "--store", "postgres"}, "--idle"},
		{[]string{"--idle-window", "0s"}, "--idle-window"},
		{[]string{"--ceiling-workers", "0"}, "--ceiling-workers"},
		{[]string{"extra"}, "unknown command"},
	} {
		code, out, errs := runCLI(t, append([]string{"bench"}, tc.args...)...)
		if code != 2 || !strings.Contains(errs, tc.want) || out != "" {
			t.Errorf("bench %v: exit %d, stdout %q, stderr %q; want exit 2, nothing printed, and %q", tc.args, code, out, errs, tc.want)
		}
	}
}
