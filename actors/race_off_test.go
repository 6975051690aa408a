//go:build !race

package actors

const raceOn = false
