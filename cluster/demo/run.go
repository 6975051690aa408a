package demo

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/drover-dev/drover/actors"
)

// Sampler polls the cluster tree and records every change of owner, how
// long units of killed nodes took to run elsewhere, and every moment after
// convergence at which a unit was listed by more or fewer than one node.
type Sampler struct {
	c         *Cluster
	mu        sync.Mutex
	owner     map[string]string // unit -> node it last ran on
	moves     int
	kills     []killRec
	samples   int
	bad       []string // convergence violations
	converged bool
	watch     map[string]*watched // source -> its unowned units
}

// watched is a source whose units must not stay without a running owner
// while some node runs it.
type watched struct {
	units   []string
	limit   time.Duration
	since   map[string]time.Time // unit -> first sample it had no running owner
	told    map[string]bool      // units whose current gap is reported
	longest time.Duration
	bad     []string
}

type killRec struct {
	node    string
	at      time.Time
	units   map[string]bool // waiting to run elsewhere
	n       int             // units it ran when killed
	took    time.Duration
	slowest string // the unit that waited longest
	back    bool   // the node was restarted: running on it again counts too
}

// NewSampler starts with the current owners unknown.
func (c *Cluster) NewSampler() *Sampler {
	return &Sampler{c: c, owner: map[string]string{}, watch: map[string]*watched{}}
}

// Watch makes every later sample check source's units: while some node
// runs the source (its tree shows it running), none of units may go
// without a running owner for more than limit.
func (s *Sampler) Watch(source string, units []string, limit time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.watch[source] = &watched{units: append([]string(nil), units...), limit: limit, since: map[string]time.Time{}, told: map[string]bool{}}
}

// Unowned is, per watched source, the longest time a unit of it was seen
// without a running owner while a node ran the source, and the times that
// passed the limit.
func (s *Sampler) Unowned() (map[string]time.Duration, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	longest := map[string]time.Duration{}
	var bad []string
	for src, w := range s.watch {
		longest[src] = w.longest
		bad = append(bad, w.bad...)
	}
	return longest, bad
}

// sampleWatched updates the watched sources from one cluster tree.
func (s *Sampler) sampleWatched(t ClusterTree, running map[string]string, now time.Time) {
	for src, w := range s.watch {
		var runners []string
		for _, n := range t.Nodes {
			for _, st := range n.Sources {
				if st.Name == src && st.State == actors.StateRunning {
					runners = append(runners, n.Node)
				}
			}
		}
		if len(runners) == 0 {
			clear(w.since) // nobody runs it: nobody can own its units
			clear(w.told)
			continue
		}
		for _, u := range w.units {
			if running[u] != "" {
				delete(w.since, u)
				delete(w.told, u)
				continue
			}
			first, ok := w.since[u]
			if !ok {
				w.since[u] = now
				continue
			}
			d := now.Sub(first)
			if d > w.longest {
				w.longest = d
			}
			if d > w.limit && !w.told[u] && len(w.bad) < 20 {
				w.told[u] = true
				w.bad = append(w.bad, fmt.Sprintf("%s had no running owner for %s at %s while %v ran %s",
					u, d.Round(time.Millisecond), now.Format("15:04:05.000"), runners, src))
			}
		}
	}
}

// Run samples every interval until ctx ends.
func (s *Sampler) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		s.Sample(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sample takes one sample.
func (s *Sampler) Sample(ctx context.Context) {
	tctx, cancel := context.WithTimeout(ctx, time.Second)
	t, err := s.c.Tree(tctx)
	cancel()
	if err != nil {
		return
	}
	now := time.Now()
	running := t.Running()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sampleWatched(t, running, now)
	s.samples++
	for u, n := range running {
		if prev, ok := s.owner[u]; ok && prev != n {
			s.moves++
		}
		s.owner[u] = n
	}
	for i := range s.kills {
		k := &s.kills[i]
		for u := range k.units {
			if n := running[u]; n != "" && (n != k.node || k.back) {
				delete(k.units, u)
				if d := now.Sub(k.at); d > k.took {
					k.took, k.slowest = d, u
				}
			}
		}
	}
	if s.converged {
		// A unit may be listed by two nodes for the moment of a handover —
		// the old owner "stopping", the new one "acquiring" until the lease
		// is released — but never held by two: held means running,
		// retrying or stopping with a lease.
		for u, ns := range t.Holders() {
			if len(ns) > 1 && len(s.bad) < 20 {
				s.bad = append(s.bad, fmt.Sprintf("%s held by %v at %s (%s)", u, ns, now.Format("15:04:05.000"), t.describe(u)))
			}
		}
	}
}

// describe lists how each node shows unit u: state and lease token (the
// nodes' trees are fetched concurrently, not at one instant).
func (t ClusterTree) describe(u string) string {
	var out []string
	for _, n := range t.Nodes {
		for _, src := range n.Sources {
			for _, us := range src.Units {
				if us.Unit == u {
					out = append(out, fmt.Sprintf("%s %s token %d", n.Node, us.State, us.LeaseToken))
				}
			}
		}
	}
	return strings.Join(out, ", ")
}

// Converged marks the start of the period in which every sample must list
// each unit at most once.
func (s *Sampler) Converged() {
	s.mu.Lock()
	s.converged = true
	s.mu.Unlock()
}

// Killed records that node was killed now, with the units it ran.
func (s *Sampler) Killed(node string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	units := map[string]bool{}
	for u, n := range s.owner {
		if n == node {
			units[u] = true
		}
	}
	s.kills = append(s.kills, killRec{node: node, at: time.Now(), units: units, n: len(units)})
}

// Restarted records that a killed node runs again: from now on its
// killed units count as failed over when they run on it too (the chaos
// demo restarts nodes before the others may have taken everything over).
func (s *Sampler) Restarted(node string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.kills {
		if s.kills[i].node == node {
			s.kills[i].back = true
		}
	}
}

// Failover is the longest time a killed node's unit waited to run
// elsewhere; an error when some still have not.
func (s *Sampler) Failover() (time.Duration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var max time.Duration
	for _, k := range s.kills {
		if len(k.units) > 0 {
			var us []string
			for u := range k.units {
				us = append(us, u)
			}
			return 0, fmt.Errorf("units of killed %s not running elsewhere: %s", k.node, strings.Join(us, ", "))
		}
		if k.took > max {
			max = k.took
		}
	}
	return max, nil
}

// KillReports describe each kill: when, how many units the node ran, how
// long the slowest waited to run again and which it was, or which still
// wait.
func (s *Sampler) KillReports() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, k := range s.kills {
		r := fmt.Sprintf("kill -9 %s at %s: %d units", k.node, k.at.Format("15:04:05.000"), k.n)
		if len(k.units) > 0 {
			var us []string
			for u := range k.units {
				us = append(us, u)
			}
			sort.Strings(us)
			r += ", not running again: " + strings.Join(us, ", ")
		} else if k.n > 0 {
			r += fmt.Sprintf(", all running again after %.2fs (the last: %s)", k.took.Seconds(), k.slowest)
		}
		out = append(out, r)
	}
	return out
}

// Moves counts changes of owner seen.
func (s *Sampler) Moves() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.moves
}

// Violations are samples after convergence in which a unit was held by two
// nodes.
func (s *Sampler) Violations() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.bad...)
}

// Samples counts samples taken.
func (s *Sampler) Samples() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples
}

// Plan is what `drover demo` does.
type Plan struct {
	Rate     int           // messages per second
	Duration time.Duration // 0: until ctx ends
	Kills    []Kill
	Restart  time.Duration // restart killed nodes this long after; 0: never
	Verify   bool
	// Seed seeds the produced workload and the chaos.
	Seed uint64
	// Chaos, when positive, is `drover demo --chaos`: produce this long
	// (it replaces Duration) while kill -9s, SIGTERMs, restarts and store
	// cuts hit random nodes (see ChaosMinEvery); then restart every
	// stopped node, restore every store proxy, drain and (with Verify)
	// verify. It needs a cluster started with Config.ProxyStore and no
	// Kills.
	Chaos time.Duration
}

// Kill is "--kill node-2@10s".
type Kill struct {
	Node string
	At   time.Duration
}

// ParseKill reads "node-2@10s".
func ParseKill(s string) (Kill, error) {
	name, at, ok := strings.Cut(s, "@")
	if !ok || name == "" {
		return Kill{}, fmt.Errorf("--kill %q: want <node>@<duration>, e.g. node-2@10s", s)
	}
	d, err := time.ParseDuration(at)
	if err != nil || d < 0 {
		return Kill{}, fmt.Errorf("--kill %q: %q is not a duration", s, at)
	}
	return Kill{Node: name, At: d}, nil
}

// Run starts every node, produces at the plan's rate, kills and restarts
// on schedule, and — with a duration — stops producing, waits for the
// cluster to drain and (with Verify) checks the store. Without a duration
// it runs until ctx ends.
func (c *Cluster) Run(ctx context.Context, p Plan) (Verdict, error) {
	if p.Chaos > 0 {
		switch {
		case len(p.Kills) > 0:
			return Verdict{}, errors.New("demo: chaos chooses its own kills: give no Kills with Chaos")
		case p.Duration > 0 && p.Duration != p.Chaos:
			return Verdict{}, errors.New("demo: Chaos is the duration: give no other Duration")
		case !c.cfg.ProxyStore:
			return Verdict{}, errors.New("demo: chaos cuts store connections: start the cluster with Config.ProxyStore")
		}
		p.Duration = p.Chaos
	}
	for _, k := range p.Kills {
		if _, err := c.Node(k.Node); err != nil {
			return Verdict{}, err
		}
	}
	for _, n := range c.nodes {
		if err := c.StartNode(n); err != nil {
			return Verdict{}, err
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	_, err := c.WaitConverged(cctx)
	cancel()
	if err != nil {
		return Verdict{}, err
	}
	fmt.Fprintf(c.log, "cluster converged: %d units on %d nodes\n", len(c.Units()), len(c.nodes))
	sampler := c.NewSampler()
	sctx, stopSampler := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); sampler.Run(sctx, 100*time.Millisecond) }()
	sampler.Sample(ctx)
	sampler.Converged()
	defer func() { stopSampler(); wg.Wait() }()

	prod, err := c.NewProducer(p.Seed)
	if err != nil {
		return Verdict{}, err
	}
	defer prod.Close()
	pctx, stopProducing := context.WithCancel(ctx)
	if p.Duration > 0 {
		pctx, stopProducing = context.WithTimeout(ctx, p.Duration)
	}
	defer stopProducing()
	perr := make(chan error, 1)
	go func() { perr <- prod.Run(pctx, p.Rate) }()

	// kills and restarts run beside the producer; they end with Run
	schedCtx, stopSchedule := context.WithCancel(ctx)
	var sched sync.WaitGroup
	defer func() { stopSchedule(); sched.Wait() }()
	start := time.Now()
	for _, k := range p.Kills {
		sched.Add(1)
		go func() {
			defer sched.Done()
			select {
			case <-pctx.Done():
				return
			case <-time.After(time.Until(start.Add(k.At))):
			}
			n, _ := c.Node(k.Node)
			sampler.Sample(ctx)
			sampler.Killed(k.Node)
			fmt.Fprintf(c.log, "%s: kill -9 %s (pid %d)\n", time.Since(start).Round(time.Millisecond), k.Node, n.Pid())
			if err := c.Kill(n); err != nil {
				fmt.Fprintf(c.log, "kill %s: %v\n", k.Node, err)
				return
			}
			if p.Restart > 0 {
				select {
				case <-schedCtx.Done():
					return
				case <-time.After(p.Restart):
				}
				fmt.Fprintf(c.log, "%s: restarting %s\n", time.Since(start).Round(time.Millisecond), k.Node)
				if err := c.StartNode(n); err != nil {
					fmt.Fprintf(c.log, "restart %s: %v\n", k.Node, err)
				}
			}
		}()
	}
	var ch *chaos
	chaosDone := make(chan struct{})
	if p.Chaos > 0 {
		ch = c.newChaos(sampler, p.Seed, start)
		defer ch.end()
		go func() { defer close(chaosDone); ch.run(pctx) }()
	} else {
		close(chaosDone)
	}
	<-pctx.Done()
	<-chaosDone
	if err := <-perr; err != nil {
		return Verdict{}, err
	}
	if p.Duration == 0 || ctx.Err() != nil {
		return Verdict{Produced: prod.Total()}, ctx.Err()
	}
	fmt.Fprintf(c.log, "%s: stopped producing after %d messages\n", time.Since(start).Round(time.Millisecond), prod.Total())
	var counts ChaosCounts
	var chaosProblems []string
	if ch != nil {
		ch.finish()
		counts, chaosProblems = ch.result()
		fmt.Fprintf(c.log, "%s: chaos over (kills=%d terms=%d restarts=%d cuts=%d): every node runs, every store proxy is open\n",
			time.Since(start).Round(time.Millisecond), counts.Kills, counts.Terms, counts.Restarts, counts.Cuts)
	}
	fmt.Fprintf(c.log, "%s: waiting for the cluster to drain\n", time.Since(start).Round(time.Millisecond))
	dctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	sent := prod.Produced()
	withChaos := func(v Verdict) Verdict {
		if ch != nil {
			v.Chaos = true
			v.Kills, v.Terms, v.Restarts, v.Cuts = counts.Kills, counts.Terms, counts.Restarts, counts.Cuts
			v.Problems = append(v.Problems, chaosProblems...)
		}
		return v
	}
	if err := c.WaitDrained(dctx, sent); err != nil {
		return withChaos(Verdict{Produced: prod.Total()}), err
	}
	if ch != nil {
		// every unit must run once again, so that each kill's units are
		// seen running and the failover measured
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		_, err := c.WaitConverged(cctx)
		cancel()
		if err != nil {
			return withChaos(Verdict{Produced: prod.Total()}), fmt.Errorf("after the chaos: %w", err)
		}
	}
	sampler.Sample(ctx)
	v := Verdict{Produced: prod.Total()}
	if p.Verify {
		if v, err = c.Verify(ctx, sent); err != nil {
			return withChaos(v), err
		}
	}
	v = withChaos(v)
	if ch != nil {
		for _, r := range sampler.KillReports() {
			fmt.Fprintf(c.log, "failover: %s\n", r)
		}
	}
	v.Moved = sampler.Moves()
	fo, ferr := sampler.Failover()
	v.Failover = fo
	if ferr != nil {
		v.Problems = append(v.Problems, ferr.Error())
	}
	for _, b := range sampler.Violations() {
		v.Problems = append(v.Problems, "held by two nodes: "+b)
	}
	if ferr != nil && (len(p.Kills) > 0 || ch != nil) {
		return v, ferr
	}
	return v, nil
}
