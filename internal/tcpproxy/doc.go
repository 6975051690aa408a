// Package tcpproxy is a TCP proxy to put between a client and its server,
// to drop every connection or to refuse connections for a while and accept
// them again on the same port, as a server that restarts would, while the
// server behind it keeps its data. awstest wraps it for the SQS and Kinesis
// emulators; the Pub/Sub tests use it in front of pstest; `drover demo
// --chaos` runs one in front of the store for each node process, to cut one
// node's store connections at a time. It lives at the module root so that
// both brokers/ and cluster/demo can import it.
//
// Goroutines: a Proxy runs one accept goroutine while it listens and two
// per connection; Close ends them all and waits. IgnoreGoroutines names
// them for goleak.
package tcpproxy
