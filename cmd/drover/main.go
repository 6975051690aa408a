package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

// exitError carries a process exit status out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the CLI with args and returns the exit status: 0 success,
// 1 failure (a broken invariant, a failed check), 2 bad usage or config.
func run(args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil && ee.err.Error() != "" {
			fmt.Fprintln(stderr, "drover:", ee.err)
		}
		return ee.code
	}
	fmt.Fprintln(stderr, "drover:", err)
	return 2
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "drover",
		Short:         "drover applies streams and queues to a store, on a cluster of nodes",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newVersion(), newSim(), newTree(), newEvents(), newNode(), newCheck(), newDemo(), newDLQ(), newBench())
	root.AddCommand(newControls()...)
	return root
}
