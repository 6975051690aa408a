// Package quality computes data-quality windows (architecture §8): per
// source and node, over WindowDuration or WindowRows rows, whichever comes first, the
// rows read and failed, each top-level field's presence, null rate, JSON
// type and values that do not fit a declared schema type, drift against the
// previous window, and a status.
//
// Everything here is pure and synchronous: no clock (callers pass times in),
// no I/O, no goroutines. A Stats is owned by one goroutine (an actor); unit
// actors may count a batch in their own Stats and hand it to the source
// supervisor, which Merges it into the window and Closes the window when
// Due says so. Close returns a persistence.QualityWindow ready for
// Store.WriteQuality.
//
// Observe reads the documents Record (package decode) produced: it checks
// their top-level shape and skips nested values by bracket counting rather
// than validating every byte, and it never panics on any input.
package quality
