//go:build drover_mutate

package mutate

import (
	"fmt"
	"slices"
	"sync"
)

// Enabled reports whether this build can turn switches on.
const Enabled = true

var (
	mu sync.RWMutex
	on = map[string]bool{}
)

// On reports whether the switch name is on.
func On(name string) bool {
	mu.RLock()
	defer mu.RUnlock()
	return on[name]
}

// Set turns the switch name on or off; it panics on an unknown name.
func Set(name string, v bool) {
	if !slices.Contains(All, name) {
		panic(fmt.Sprintf("mutate: unknown switch %q", name))
	}
	mu.Lock()
	defer mu.Unlock()
	on[name] = v
}
