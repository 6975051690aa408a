package actors

import (
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

// A restartDue can outlive its restart: restartWaiting stops the timer
// of a unit waiting out its backoff and arms another, and when the first
// had already fired its restartDue restarts the unit while the second's
// is still on its way. If the unit passivated meanwhile (PassivateAfter
// below the second's jitter, as the simulator draws it), the child has no
// actor (pid nil) when the second comes: it must be dropped, not fail the
// supervisor (and with it every unit of the source).
func TestRestartDueForPassiveChildIsDropped(t *testing.T) {
	s := &supervisor{children: map[string]*child{}}
	c := &child{unit: "s/0", passive: &passiveUnit{}}
	s.children[c.unit] = c
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("a restartDue for a passive unit failed the supervisor: %v", r)
		}
	}()
	s.onRestartDue(nil, &restartDue{unit: c.unit, pid: actor.NewPID("nonhost", "node/source-s/0")})
	if c.passive == nil || c.pid != nil || c.waiting {
		t.Errorf("the passive child changed: passive %v, pid %v, waiting %v", c.passive, c.pid, c.waiting)
	}
}
