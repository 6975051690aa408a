//go:build unix

package freeport

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// lockPort takes port p's lock file in dir without waiting: ok is false
// when another freeport user (in any process) holds it. A lock file that
// cannot be opened (a directory of another user) leaves the port
// unlocked (nil, true): the bind check still applies.
func lockPort(dir string, p int) (*os.File, bool) {
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(p)+".lock"), os.O_RDONLY|os.O_CREATE, 0o666)
	if err != nil {
		return nil, true
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		_ = f.Close()
		return nil, false
	}
	return f, true
}
