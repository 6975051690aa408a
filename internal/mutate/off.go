//go:build !drover_mutate

package mutate

// On reports whether the switch name is on: never, in this build.
func On(string) bool { return false }

// Enabled reports whether this build can turn switches on.
const Enabled = false
