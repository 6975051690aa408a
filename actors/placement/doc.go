// Package placement is drover's view of the other nodes: the Membership
// interface (implemented on hashicorp/memberlist for production and
// simulated by the testkit) and placement, the pure function that turns a
// membership view and a list of units into "who owns what".
//
// Placement is computed by every node alike from the same inputs, so nodes
// agree whenever their views agree. When views differ for a moment two nodes
// may both want a unit: leases with fencing tokens (package persistence)
// make that safe.
package placement
