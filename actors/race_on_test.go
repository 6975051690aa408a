//go:build race

package actors

// raceOn: the race detector instruments allocations, so allocation
// counts are compared only without it.
const raceOn = true
