package testkit

// Faults in force (Disturb), the quiet they must leave, and settling.

import "time"

// Disturb marks a fault the caller injected itself (a broker or store
// fault) as in force, so kills meanwhile are not held to the failover
// bound; Undisturb ends it.
func (c *Cluster) Disturb(what string) { c.disturb(what) }

// disturb records a fault in force. A fault that begins while a kill's
// failover is still within its bound makes that failover exempt from the
// bound too: a store outage during a failover legitimately delays it (the
// units retry, fail to their supervisors and are restarted after a backoff
// once the store is back), and how much longer is not the failover's.
func (c *Cluster) disturb(what string) {
	if !c.disturbed[what] {
		c.spans = append(c.spans, span{what: what, from: c.s.now})
	}
	c.disturbed[what] = true
	c.exemptKills(what)
}

// exemptKills exempts the failovers still within their bound from it: a
// fault or a node event (another kill, a graceful stop that takes a
// would-be owner away) during a failover legitimately delays it.
func (c *Cluster) exemptKills(what string) {
	for i := range c.led.kills {
		if k := &c.led.kills[i]; k.clean && c.s.now.Sub(k.at) <= c.cfg.FailoverBound {
			k.clean = false
			c.event("failover-exempt", k.node, "", what)
		}
	}
}
func (c *Cluster) Undisturb(what string) {
	if c.disturbed[what] {
		delete(c.disturbed, what)
		for i := len(c.spans) - 1; i >= 0; i-- {
			if c.spans[i].what == what && c.spans[i].to.IsZero() {
				c.spans[i].to = c.s.now
				break
			}
		}
		c.touch()
	}
}

// span is a time a fault was in force (to zero: still is).
type span struct {
	what     string
	from, to time.Time
}

// disturbUntil records a fault that ends by itself at until.
func (c *Cluster) disturbUntil(what string, until time.Time) {
	c.disturb(what)
	c.s.at(-1, until, "undisturb", func() { c.Undisturb(what) })
}

// touch records a node event or the end of a fault: the cluster is quiet
// only some time after it.
func (c *Cluster) touch() {
	c.lastDisturb = c.s.now
	if c.partitioned() {
		c.led.partEvents++
	}
	c.spans = append(c.spans, span{what: "event", from: c.s.now, to: c.s.now})
}

// quietDuring reports whether no fault was in force and no node event
// happened between from and to.
func (c *Cluster) quietDuring(from, to time.Time) bool {
	for _, sp := range c.spans {
		end := sp.to
		if end.IsZero() {
			end = c.s.now
		}
		if !sp.from.After(to) && !end.Before(from) {
			return false
		}
	}
	return len(c.cut) == 0 || to.Before(c.s.now)
}

// quiet reports whether no fault is in force and nothing happened to the
// cluster for d.
func (c *Cluster) quiet(d time.Duration) bool {
	return len(c.disturbed) == 0 && len(c.cut) == 0 && c.s.now.Sub(c.lastDisturb) >= d
}

// Busy reports whether node has a job of kind in flight ("fetch",
// "apply", "ack", "acquire", "renew", ...), not yet run.
func (c *Cluster) Busy(node, kind string) bool {
	n, err := c.node(node)
	if err != nil {
		return false
	}
	return c.s.has(n.sid, "job:"+kind)
}

// Settled reports whether every message published so far is committed and
// no queue holds messages.
func (c *Cluster) Settled() bool {
	if c.scripts > 0 || c.led.unapplied > 0 {
		return false // scenario steps still to run, or messages not committed
	}
	for _, q := range c.queues {
		if q.Pending() > 0 || q.InFlight() > 0 {
			return false
		}
	}
	return true
}

// Settle heals every partition, resumes every paused node, clears injected
// faults, and runs until Settled or limit; then it runs one more virtual
// second so that results in flight reach the actors (trees agree with the
// store).
func (c *Cluster) Settle(limit time.Duration) bool {
	for _, name := range c.order {
		n := c.nodes[name]
		if c.w.members[name] != nil {
			c.w.members[name].isolated = false
		}
		if n.sid > 0 {
			c.s.resume(n.sid)
		}
	}
	c.store.failNext = map[string]int{}
	c.store.afterCommit = 0
	c.store.raceNext = 0
	clear(c.store.raced)
	c.store.down = nil
	clear(c.store.locks)
	clear(c.cut)
	for _, st := range c.streams {
		st.ClearFaults()
	}
	for _, q := range c.queues {
		q.ClearFaults()
	}
	c.disturbed = map[string]bool{}
	c.event("settle", "", "", "")
	if !c.RunUntil(c.Settled, limit) {
		return false
	}
	// the store is settled; let results in flight reach the actors so that
	// trees agree with the store
	c.Run(time.Second)
	c.checkCaughtUp()
	return true
}
