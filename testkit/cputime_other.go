//go:build !linux

package testkit

import "time"

// threadCPU is not available here: placement is timed by the wall clock.
func threadCPU() (time.Duration, bool) { return 0, false }
