package actors

import (
	"testing"
	"time"
)

// Only the spawn path creates a unit's entry; a write of a forgotten unit
// or of an earlier child of the same id reaches nothing.
func TestRegistryTakesWritesOnlyFromTheCurrentChild(t *testing.T) {
	r := newRegistry("n1")
	r.addSource("s", "memory")
	units := func() []UnitStatus { return r.snapshot()[0].Units }

	r.unit("s", "s/0", 1, func(u *treeUnit) { u.setState(StateStopped) })
	if got := units(); len(got) != 0 {
		t.Fatalf("a write created an entry: %+v", got)
	}
	old := r.addUnit("s", "s/0")
	r.unit("s", "s/0", old, func(u *treeUnit) { u.setState(StateRunning); u.leaseToken = 7 })
	r.removeUnit("s", "s/0", old) // its supervisor restarted
	r.unit("s", "s/0", old, func(u *treeUnit) { u.setState(StateStopped) })
	r.leaseRenewed("s", "s/0", 7, time.Unix(100, 0))
	if got := units(); len(got) != 0 {
		t.Fatalf("the forgotten unit's last writes brought it back: %+v", got)
	}
	cur := r.addUnit("s", "s/0") // the next instance runs it again
	if cur == old {
		t.Fatalf("generation %d handed out twice", cur)
	}
	r.unit("s", "s/0", old, func(u *treeUnit) { u.setState(StateStopped); u.applied = 99 })
	r.removeUnit("s", "s/0", old)
	r.leaseRenewed("s", "s/0", 7, time.Unix(100, 0))
	got := units()
	if len(got) != 1 || got[0].State != StateStarting || got[0].Applied != 0 || got[0].LeaseExpiresAt != nil {
		t.Fatalf("the earlier child's writes reached the current one: %+v", got)
	}
	r.unit("s", "s/0", cur, func(u *treeUnit) { u.leaseToken = 8 })
	r.leaseRenewed("s", "s/0", 8, time.Unix(100, 0))
	if got := units(); got[0].LeaseExpiresAt == nil || !got[0].LeaseExpiresAt.Equal(time.Unix(100, 0)) {
		t.Fatalf("renewal of the current lease not recorded: %+v", got[0])
	}
	r.removeUnit("s", "s/0", cur)
	if got := units(); len(got) != 0 {
		t.Fatalf("removed entry still listed: %+v", got)
	}
}
