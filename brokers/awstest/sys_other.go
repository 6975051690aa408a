//go:build !unix

package awstest

import (
	"os"
	"syscall"
)

// lockFile does not lock where flock is missing: parallel first installs
// may then race.
func lockFile(string) (func(), error) { return func() {}, nil }

func sysProcAttr() *syscall.SysProcAttr { return nil }

func killGroup(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}
