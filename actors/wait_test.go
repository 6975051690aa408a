package actors

import (
	"testing"
	"time"
)

// waitUntil polls cond until it holds, failing t after 20 s with what.
// The tests that use it run on real goroutines (exec.Goroutines): polling
// a condition with a deadline is their only wait.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitUntilf(t, func() string { return what }, cond)
}

// waitUntilf is waitUntil with a description made at the failure (the
// state the test saw last).
func waitUntilf(t *testing.T, describe func() string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 20 s: %s", describe())
		}
		time.Sleep(5 * time.Millisecond) // polling a condition with a deadline
	}
}
