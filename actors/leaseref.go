package actors

import "github.com/drover-dev/drover/persistence"

// leaseRef is what the runtime keeps of a lease its node holds, where it
// keeps one per unit for as long as the unit lives (the leaser's table, a
// passive unit's record): 40 bytes instead of a persistence.Lease's 136
// (issue 12 item 5). The owner is always the node itself; RenewedAt and
// the previous holder are the store's answers, never sent back to it.
// full gives the lease back as the stores read it.
type leaseRef struct {
	unit     string
	token    int64
	expires  stamp
	acquired stamp
}

func refOf(l persistence.Lease) leaseRef {
	return leaseRef{unit: l.Unit, token: l.Token, expires: stampOf(l.ExpiresAt), acquired: stampOf(l.AcquiredAt)}
}

// full is the lease as owner (the node) holds it.
func (r leaseRef) full(owner string) persistence.Lease {
	return persistence.Lease{Unit: r.unit, Owner: owner, Token: r.token, ExpiresAt: r.expires.time(), AcquiredAt: r.acquired.time()}
}
