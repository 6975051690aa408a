// Package brokertest is the conformance suite every broker adapter runs
// against a real server (or, for brokers/memory, against itself).
//
// The suite is a list of named definitions. An adapter's test calls
// RunStream or RunQueue with a harness (which creates a fresh topic or queue
// per definition on its server) and a Plan that names every definition it
// runs and every one it leaves out, each left-out one with its reason. A
// definition that is in neither list, or that a plan runs without the
// harness offering what it needs, fails the test: a new definition forces
// every adapter to decide. Left-out definitions are not run and not skipped
// (no t.Skip): their reasons are logged, and the Plan in the adapter's test
// file is where a reader finds them.
//
// # Harness
//
// A StreamHarness makes StreamFixtures, a QueueHarness makes QueueFixtures.
// A fixture opens new instances of the adapter under test on its topic or
// queue and writes messages with a separate client (not the adapter).
// Optional capabilities are extra interfaces a fixture implements:
// PartitionAdder, Trimmer, Resharder, ServerRestarter, ConnectionCutter. A
// harness that starts goroutines of its own after a definition begins (a
// fake server's connection handlers) names them through LeakIgnorer.
//
// # Time
//
// The suite runs on the wall clock against real servers. It never sleeps to
// synchronise: it waits for conditions with deadlines. Where a definition
// must show that a call is still blocked (a fetch waiting for data), it
// asserts that the call has not returned within a short window; the outcome
// it checks does not depend on how goroutines interleave.
//
// # Helpers for adapters' own tests
//
// Context, PollN, Open, Headers, ReceiveAck and ReportRates are what the
// adapters' focused tests and benchmarks share (a bounded context, reading
// n messages, opening with cleanup, a message's headers as one string,
// draining with acks, reporting raw and adapter rates). They assert nothing about an adapter beyond what their
// callers ask.
//
// # Goroutines
//
// Definitions start goroutines only to run one blocking call while the test
// goroutine acts, and wait for each before they return.
package brokertest
