package demo

import (
	"fmt"
	"os"
	"strings"
)

// logTailLines is how much of a node's log an unexpected exit reports.
const logTailLines = 40

// exitText describes how a process ended.
func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// LogTail is the last lines (at most max) of the node's log (stdout and
// stderr of all its processes), or why it cannot be read.
func (n *Node) LogTail(max int) string {
	data, err := os.ReadFile(n.LogPath)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", n.LogPath, err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > max {
		lines = lines[len(lines)-max:]
	}
	return strings.Join(lines, "\n")
}
