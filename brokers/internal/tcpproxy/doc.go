// Package tcpproxy is the TCP proxy the adapter tests put between an
// adapter and its test server, to drop every connection or to refuse
// connections for a while and accept them again on the same port, as a
// server that restarts would, while the server behind it keeps its data.
// awstest wraps it for the SQS and Kinesis emulators; the Pub/Sub tests use
// it in front of pstest.
//
// Goroutines: a Proxy runs one accept goroutine while it listens and two
// per connection; Close ends them all and waits. IgnoreGoroutines names
// them for goleak.
package tcpproxy
