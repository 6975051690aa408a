// Package testserver is what the test helpers that start servers share
// (awstest, pgtest, the NATS and node tests): skipping a test that has no
// server, or failing it under CI=true, where every server must be had; a
// TestMain that closes the servers after the tests ran; and a Close that
// may be called more than once.
package testserver

import (
	"fmt"
	"io"
	"os"
	"sync"
	"testing"
)

// SkipOrFail skips t with reason, or fails it with "CI=true: " and reason
// when CI=true.
func SkipOrFail(t testing.TB, reason string) {
	t.Helper()
	SkipOrFailWith(t, "CI=true: "+reason, reason)
}

// SkipOrFailWith skips t with skip, or fails it with fail when CI=true.
func SkipOrFailWith(t testing.TB, fail, skip string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s", fail)
	}
	t.Skipf("%s", skip)
}

// Main runs the tests and then closes every server. A Close error is
// printed and, when the tests passed, makes the exit code 1.
func Main[S io.Closer](m *testing.M, servers ...S) int {
	code := m.Run()
	for _, s := range servers {
		if err := s.Close(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// CloseOnce is the Close of a server that may be called more than once:
// under mu, the first call records in closed that the server is closed
// and returns stop's error; later calls return nil.
func CloseOnce(mu *sync.Mutex, closed *bool, stop func() error) error {
	mu.Lock()
	defer mu.Unlock()
	if *closed {
		return nil
	}
	*closed = true
	return stop()
}
