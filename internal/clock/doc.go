// Package clock is the time source every piece of drover logic takes from
// outside. Production wires Real; the testkit wires a virtual clock that only
// moves when the simulation advances it.
//
// Goroutines: Real.AfterFunc runs f on a goroutine of the Go runtime's timer
// (as time.AfterFunc does); f must only hand work on (send an actor message),
// never block. A virtual clock runs f on the simulation's single goroutine.
package clock
