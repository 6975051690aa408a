// Package inject holds the failure rules of the in-memory broker
// (brokers/memory) and store (persistence/memory): what their FailNext
// calls leave to be used up, matched in the order they were made.
//
// A Rules is not safe for concurrent use: its owner guards it with its own
// mutex. It starts no goroutines.
package inject
