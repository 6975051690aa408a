//go:build !linux

package main

import (
	"io"
	"os"
)

// isTerminal reports whether w is a character device: a terminal (or a
// device such as /dev/null, which is taken as one to be safe).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
