// Package storetest is the conformance suite every persistence.Store runs,
// and the manual Clock the suite drives stores with.
//
// Goroutines: Clock starts none; its AfterFunc callbacks run on the goroutine
// that calls Advance or Set.
package storetest
