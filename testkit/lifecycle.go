package testkit

// The node faults a scenario injects: kill, restart, stop, partition, pause.

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/drover-dev/drover/actors/placement"
)

// Running lists the nodes whose process runs (not killed or stopped).
func (c *Cluster) Running() []string {
	var out []string
	for _, name := range c.order {
		if s := c.nodes[name].state; s == "running" || s == "stopping" {
			out = append(out, name)
		}
	}
	return out
}

// Kill ends a node's process at once (kill -9): no handoff, its leases stay
// until others take them over.
func (c *Cluster) Kill(name string) error {
	n, err := c.node(name)
	if err != nil || n.state == "killed" || n.state == "stopped" {
		return err
	}
	units := map[string]bool{}
	leases, lerr := c.inner.List(context.Background())
	if lerr == nil {
		for _, l := range leases {
			if l.Owner == name && c.runElsewhere(name, sourceOf(l.Unit)) {
				// held to the failover bound only when another node can
				// take it: one that runs its source
				units[l.Unit] = true
			}
		}
	}
	clean := len(c.disturbed) == 0 && c.store.down == nil
	c.exemptKills("kill " + name) // a second kill may delay the first one's failover
	c.led.kills = append(c.led.kills, kill{node: name, at: c.s.now, units: units, clean: clean})
	c.touch()
	c.s.kill(n.sid)
	n.state = "killed"
	c.event("kill", name, "", strconv.Itoa(len(units)))
	return nil
}

// runElsewhere reports whether a running node other than name runs source.
func (c *Cluster) runElsewhere(name, source string) bool {
	for _, o := range c.Running() {
		// a drained node takes no unit (placement leaves it out)
		if n := c.nodes[o]; o != name && n.state == "running" && c.runs(n, source) && !c.Drained(o) {
			return true
		}
	}
	return false
}

// Restart starts a killed or stopped node again, as a new process.
func (c *Cluster) Restart(name string) error {
	n, err := c.node(name)
	if err != nil {
		return err
	}
	if n.state == "running" || n.state == "stopping" {
		return fmt.Errorf("testkit: %s is %s", name, n.state)
	}
	c.s.kill(n.sid)
	delete(c.disturbed, "partition:"+name)
	delete(c.disturbed, "pause:"+name)
	c.touch()
	return c.startNode(n)
}

// Stop stops a node gracefully, as SIGTERM does: it announces "leaving",
// drains its units (batches finish, checkpoints, leases released) and
// leaves. The stop proceeds as the simulation runs; Stopped tells when it
// is done.
func (c *Cluster) Stop(name string) error {
	n, err := c.node(name)
	if err != nil {
		return err
	}
	if n.state != "running" {
		return fmt.Errorf("testkit: %s is %s", name, n.state)
	}
	n.state = "stopping"
	n.stopAt = c.s.now
	c.exemptKills("stop " + name)
	c.touch()
	c.event("stop", name, "", "")
	sid := n.sid
	c.s.after(sid, 0, "leave", func() {
		_ = n.member.SetState(context.Background(), placement.StateLeaving)
		done := n.node.Drain()
		var wait func()
		wait = func() {
			select {
			case <-done:
				_ = n.member.Leave(context.Background())
				n.node.Close()
				n.state = "stopped"
				c.event("stopped", name, "", "")
				if took := c.s.now.Sub(n.stopAt); took > StopBound {
					c.check("stop", fmt.Sprintf("%s's graceful stop took %s (bound %s)", name, took, StopBound))
				}
			default:
				c.s.after(sid, 10*time.Millisecond, "leave-wait", wait)
			}
		}
		wait()
	})
	return nil
}

// Stopped reports whether a graceful stop has finished.
func (c *Cluster) Stopped(name string) bool {
	n, err := c.node(name)
	return err == nil && n.state == "stopped"
}

// Partition cuts a node off from every other node (not from the store or
// brokers): after the detection delay each side thinks the other dead.
func (c *Cluster) Partition(name string) error {
	n, err := c.node(name)
	if err != nil {
		return err
	}
	c.w.members[n.name].isolated = true
	c.disturb("partition:" + name)
	c.event("partition", name, "", "")
	return nil
}

// Heal reconnects a partitioned node.
func (c *Cluster) Heal(name string) error {
	n, err := c.node(name)
	if err != nil {
		return err
	}
	if m := c.w.members[n.name]; m != nil {
		m.isolated = false
	}
	c.Undisturb("partition:" + name)
	if !c.partitioned() {
		c.checkChurn() // the partition episode is over
	}
	c.event("heal", name, "", "")
	return nil
}

// Pause freezes a node as a long GC pause or SIGSTOP would: nothing of it
// runs, it answers no probes; when resumed it carries on believing it
// still holds its leases.
func (c *Cluster) Pause(name string) error {
	n, err := c.node(name)
	if err != nil {
		return err
	}
	c.s.pause(n.sid)
	c.disturb("pause:" + name)
	c.event("pause", name, "", "")
	return nil
}

// Resume ends a pause.
func (c *Cluster) Resume(name string) error {
	n, err := c.node(name)
	if err != nil {
		return err
	}
	c.s.resume(n.sid)
	c.Undisturb("pause:" + name)
	c.event("resume", name, "", "")
	return nil
}
