package testkit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/actors/placement"
)

// Drain takes a running node out of placement without stopping it, as
// drover drain does: it announces "leaving", its units hand over (batches
// finish, checkpoints, leases released) and it stays a member, owning
// nothing, until Undrain, a stop or a kill. Checked: its tree lists no
// unit within StopBound.
func (c *Cluster) Drain(name string) error {
	n, err := c.node(name)
	if err != nil {
		return err
	}
	if n.state != "running" || n.drained != nil {
		return fmt.Errorf("testkit: %s is %s (drained: %v)", name, n.state, n.drained != nil)
	}
	proc, at := n.node, c.s.now
	n.drained = proc
	c.touch()
	c.event("drain", name, "", "")
	sid := n.sid
	c.s.after(sid, 0, "drain", func() {
		_ = n.member.SetState(context.Background(), placement.StateLeaving)
		var wait func()
		wait = func() {
			if n.node != proc || n.drained != proc || n.state != "running" {
				return // undrained, stopped or killed meanwhile
			}
			units := 0
			for _, s := range proc.Tree().Sources {
				units += len(s.Units)
			}
			switch {
			case units == 0:
				c.event("drain-done", name, "", "")
			case c.s.now.Sub(at) > StopBound:
				c.check("drain", fmt.Sprintf("%s still lists %d units %s after its drain (bound %s)", name, units, c.s.now.Sub(at), StopBound))
			default:
				c.s.after(sid, 10*time.Millisecond, "drain-wait", wait)
			}
		}
		wait()
	})
	return nil
}

// Undrain brings a drained node back into placement (drover undrain): it
// announces "alive" and takes units again. A node restarted since its
// drain runs alive already: Undrain only forgets the drain.
func (c *Cluster) Undrain(name string) error {
	n, err := c.node(name)
	if err != nil {
		return err
	}
	if n.drained == nil {
		return fmt.Errorf("testkit: %s is not drained", name)
	}
	live := n.drained == n.node && n.state == "running"
	n.drained = nil
	if !live {
		return nil
	}
	c.touch()
	c.event("undrain", name, "", "")
	c.s.after(n.sid, 0, "undrain", func() {
		_ = n.member.SetState(context.Background(), placement.StateAlive)
	})
	return nil
}

// Drained reports whether name is drained (its current process).
func (c *Cluster) Drained(name string) bool {
	n, err := c.node(name)
	return err == nil && n.drained != nil && n.drained == n.node
}

// Reload applies a node's sources (SetSources) to its running process
// without a restart, as drover reload does: the sources it lacks start,
// those no longer listed hand their units over and stop.
func (c *Cluster) Reload(name string) error {
	n, err := c.node(name)
	if err != nil {
		return err
	}
	if n.state != "running" {
		return fmt.Errorf("testkit: %s is %s", name, n.state)
	}
	want := n.sources
	if want == nil {
		for _, sp := range c.specs {
			want = append(want, sp.Name)
		}
	}
	var add []actors.SourceSpec
	var remove []string
	for _, sp := range c.specs {
		switch in := slices.Contains(want, sp.Name); {
		case in && !c.runs(n, sp.Name):
			add = append(add, sp)
		case !in && c.runs(n, sp.Name):
			remove = append(remove, sp.Name)
		}
	}
	n.running = slices.Clone(want)
	c.touch()
	c.event("reload", name, "", fmt.Sprintf("add=%d remove=%d", len(add), len(remove)))
	proc := n.node
	c.s.after(n.sid, 0, "reload", func() {
		if n.removingOf != proc {
			n.removing, n.removingOf = map[string]<-chan error{}, proc
		}
		for _, s := range remove {
			n.removing[s] = proc.RemoveSource(s)
		}
		for _, sp := range add {
			c.addWhenRemoved(n, proc, sp)
		}
	})
	return nil
}

// addWhenRemoved adds sp to proc once a removal of the same source that an
// earlier Reload began has ended, as drover reload waits for it (the node
// refuses a source still being removed); it gives up when proc no longer
// runs. A removal that has not ended after StopBound is a violation.
func (c *Cluster) addWhenRemoved(n *simNode, proc *actors.Node, sp actors.SourceSpec) {
	at := c.s.now
	var try func()
	try = func() {
		if n.node != proc || n.state != "running" || n.removingOf != proc {
			return // stopped or killed meanwhile: its next start runs what it lists
		}
		if ch := n.removing[sp.Name]; ch != nil {
			select {
			case <-ch:
				delete(n.removing, sp.Name)
			default:
				if c.s.now.Sub(at) > StopBound {
					c.check("reload", fmt.Sprintf("%s: the removal of %s has not ended %s after a reload brought it back (bound %s)", n.name, sp.Name, c.s.now.Sub(at), StopBound))
					return
				}
				c.s.after(n.sid, 10*time.Millisecond, "reload-wait", try)
				return
			}
		}
		c.event("reload-add", n.name, sp.Name, "")
		proc.AddSource(sp)
	}
	try()
}

// drawDrain draws, apart from the rest of seed's scenario (which stays as
// without it), a drain of one of names undrained later (1 run in 3), and
// whether a rolling change is applied live by Reload (half the runs),
// which it returns.
func drawDrain(c *Cluster, seed uint64, names []string, step func(time.Duration, string, ...any)) (live bool) {
	drng := rand.New(rand.NewPCG(seed^0x647261696e, seed))
	live = drng.IntN(2) == 0
	if drng.IntN(3) == 0 {
		at := 2*time.Second + time.Duration(drng.Int64N(int64(18*time.Second)))
		name := names[drng.IntN(len(names))]
		back := time.Duration(2000+drng.IntN(8000)) * time.Millisecond
		step(at, "drain %s, undrain it after %s", name, back)
		c.At(at, func() { _ = c.Drain(name) })
		c.At(at+back, func() { _ = c.Undrain(name) })
	}
	return live
}

// drawReloadBack draws, apart from the rest of seed's scenario, in 1 run
// in 2 of a live rolling change ended at at, a node that drops extra by a
// reload and gets it back by another one within 300 ms, mostly while its
// units still hand over (drover reload twice: the second waits for the
// first's removal before it starts the source again).
func drawReloadBack(c *Cluster, seed uint64, names, all []string, at time.Duration, step func(time.Duration, string, ...any)) {
	drng := rand.New(rand.NewPCG(seed^0x6261636b, seed))
	if drng.IntN(2) != 0 {
		return
	}
	name := names[drng.IntN(len(names))]
	at += time.Duration(1000+drng.IntN(2000)) * time.Millisecond
	back := time.Duration(drng.IntN(300)) * time.Millisecond
	without := slices.DeleteFunc(slices.Clone(all), func(s string) bool { return s == "extra" })
	step(at, "reload %s without extra, and with it again after %s", name, back)
	c.At(at, func() {
		_ = c.SetSources(name, without)
		_ = c.Reload(name) // not running: its next start runs what it lists
	})
	c.At(at+back, func() {
		_ = c.SetSources(name, all)
		_ = c.Reload(name)
	})
}

// rollOut gives a running node the sources SetSources set: by Reload when
// live, else by a graceful stop and a restart. A node that is not running
// gets them at its next start.
func (c *Cluster) rollOut(name string, live bool) {
	if c.nodes[name].state != "running" {
		return
	}
	if live {
		_ = c.Reload(name)
		return
	}
	_ = c.Stop(name)
	var wait func()
	wait = func() {
		switch c.nodes[name].state {
		case "stopped":
			_ = c.Restart(name)
		case "stopping":
			c.At(100*time.Millisecond, wait)
		} // killed (and perhaps restarted) meanwhile: it runs extra from its next start
	}
	c.At(100*time.Millisecond, wait)
}
