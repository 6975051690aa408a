// Package exec runs blocking I/O off actor mailboxes.
//
// An actor never calls a broker or a store from its Receive: it hands a job
// to an Executor, and the executor hands the job's result back through a
// deliver function that sends it to the actor as a message. The actor cancels
// the job's context when it stops, so a 20 s long poll does not delay a stop.
//
// Goroutines: Goroutines (the production executor) runs each job on a
// goroutine of a Pool, which keeps goroutines that finished a job for the
// next one (their stacks grown already), and waits for all jobs in Wait.
// Dispatcher runs actor mailboxes on a Pool too (a node uses one pool for
// both). The testkit's executor starts no goroutine: it runs each job on
// the simulation goroutine at a virtual time it picks from its seed.
package exec
