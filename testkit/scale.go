package testkit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/actors/placement"
	"github.com/drover-dev/drover/persistence"
)

// ScaleConfig describes a scale run (Scale): one cluster of many nodes
// and units, taken through four scenarios one after the other.
type ScaleConfig struct {
	Seed uint64
	// Nodes (default 100), Units (default 20,000) and Sources (default 4)
	// size the cluster: Units stream partitions spread over Sources memory
	// streams.
	Nodes, Units, Sources int
	// Wave is how many nodes the rolling restart restarts at once
	// (default a tenth of the nodes, at least one); Down is how long a
	// node of the wave stays down between its stop and its start (default
	// 2 s: a process or pod starting again).
	Wave int
	Down time.Duration
	// Steady is how long each scenario runs on once settled, for the
	// steady lease statement rate (default 5 s).
	Steady time.Duration
	// Limit is the most virtual time a scenario (each wave of the rolling
	// restart) may take to settle (default 2 min).
	Limit time.Duration
	// Log, when set, receives a line per step.
	Log func(string)
	// Inspect, when set, is called with the cluster once each scenario
	// has settled (before its steady window), to look at it.
	Inspect func(scenario string, c *Cluster)
}

func (cfg ScaleConfig) withDefaults() ScaleConfig {
	if cfg.Nodes <= 0 {
		cfg.Nodes = 100
	}
	if cfg.Units <= 0 {
		cfg.Units = 20000
	}
	if cfg.Sources <= 0 {
		cfg.Sources = 4
	}
	if cfg.Wave <= 0 {
		cfg.Wave = max(1, cfg.Nodes/10)
	}
	if cfg.Down <= 0 {
		cfg.Down = 2 * time.Second
	}
	if cfg.Steady <= 0 {
		cfg.Steady = 5 * time.Second
	}
	if cfg.Limit <= 0 {
		cfg.Limit = 2 * time.Minute
	}
	return cfg
}

// Validate reports what is wrong with a scale configuration.
func (cfg ScaleConfig) Validate() error {
	cfg = cfg.withDefaults()
	switch {
	case cfg.Nodes < 2:
		return fmt.Errorf("nodes %d: a kill and a join need at least 2", cfg.Nodes)
	case cfg.Sources > cfg.Units:
		return fmt.Errorf("sources %d: more than the %d units", cfg.Sources, cfg.Units)
	case cfg.Wave > cfg.Nodes:
		return fmt.Errorf("wave %d: more than the %d nodes", cfg.Wave, cfg.Nodes)
	}
	return nil
}

// ScaleRow is what one scenario of a scale run measured.
type ScaleRow struct {
	Scenario string
	// Settled says every unit came to be owned exactly once, by the node
	// placement gives it among the running nodes, within the limit; Took
	// is how long that took, in virtual time, from the scenario's first
	// step (checked every 100 ms).
	Settled bool
	Took    time.Duration
	// Moved counts the lease acquisitions by another node process than
	// the unit's last owner (a restarted node is another process), until
	// settled. MustMove is what placement moves: the units whose owner by
	// placement among the running nodes differs between before and after
	// each step (each stop and each start of the rolling restart).
	// NodeUnits is the killed node's units, the joiner's share.
	Moved, MustMove, NodeUnits int
	// LeaseStmts counts the lease statements (Acquire, RenewLeases, Renew,
	// Release) the nodes sent the store until settled; SteadyRate is their
	// rate per virtual second over ScaleConfig.Steady after settling.
	LeaseStmts int64
	SteadyRate float64
	// Changes counts the membership view changes of every node until
	// settled (a node's start counts as one); PlaceMean and PlaceMax are
	// the CPU time, per change, the node spent computing placement
	// (placement.Assign) because of it: measured on the thread (Linux;
	// elsewhere wall time). Not deterministic.
	Changes             int
	PlaceMean, PlaceMax time.Duration
}

// ScaleResult is the outcome of a scale run.
type ScaleResult struct {
	Config     ScaleConfig // with the defaults filled in
	Rows       []ScaleRow
	Digest     string
	Applied    int64
	Lost       int
	Duplicated int
	Violations []Violation
	// PlaceComputed counts the placements the run computed (the nodes
	// share a memo of them), PlaceSpent their CPU time.
	PlaceComputed int
	PlaceSpent    time.Duration
}

// OK reports whether every scenario settled and every invariant held.
func (r ScaleResult) OK() bool {
	for _, row := range r.Rows {
		if !row.Settled {
			return false
		}
	}
	return len(r.Rows) > 0 && r.Lost == 0 && r.Duplicated == 0 && len(r.Violations) == 0
}

// scaleSample is one unit in how many gets a message before each scenario.
const scaleSample = 50

// Scale runs a cluster of cfg.Nodes nodes and cfg.Units units through four
// scenarios, each until every unit is owned exactly once where placement
// puts it, and measures each: a cold start; a kill -9 of one node (chosen
// by the seed); the same node joining again as a new process; a rolling
// restart of every node, cfg.Wave at a time (graceful stop, down for
// cfg.Down, start again, next wave once settled). Before each scenario one unit in 50 gets a
// message, and at the end every invariant of the simulator is checked
// (Report): nothing lost or applied twice, failover within 3 s, the tree
// and ownership invariants while it ran.
//
// The nodes share a memo of placement (placeMemo). The same seed gives the
// same run and the same rows but for the placement times, which are
// measured (CPU time).
func Scale(cfg ScaleConfig) (ScaleResult, error) {
	if err := cfg.Validate(); err != nil {
		return ScaleResult{}, err
	}
	cfg = cfg.withDefaults()
	// on one thread, so that the thread's CPU clock times placement
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	res := ScaleResult{Config: cfg}
	logf := func(f string, a ...any) {
		if cfg.Log != nil {
			cfg.Log(fmt.Sprintf(f, a...))
		}
	}
	c, err := New(Config{Seed: cfg.Seed, Nodes: cfg.Nodes, FailoverBound: 3 * time.Second})
	if err != nil {
		return res, err
	}
	defer c.Close()
	c.scale = newScaleStats()
	c.w.changed = c.scale.viewChanged
	sc := &scaleRun{c: c, cfg: cfg, wl: NewWorkload(cfg.Seed), logf: logf}
	for i := range cfg.Sources {
		n := cfg.Units / cfg.Sources
		if i < cfg.Units%cfg.Sources {
			n++
		}
		spec := actors.SourceSpec{Name: "src" + strconv.Itoa(i), Type: "memory", KeyField: "id"}
		if _, err := c.AddStream(spec, n); err != nil {
			return res, err
		}
		units := make([]string, n)
		for p := range n {
			units[p] = spec.Name + "/" + strconv.Itoa(p)
		}
		sort.Strings(units) // as a supervisor passes them to placement
		sc.units = append(sc.units, units)
	}

	rng := rand.New(rand.NewPCG(cfg.Seed^0x5ca1e, cfg.Seed+0x5ca1f))
	victim := c.order[rng.IntN(len(c.order))]
	steps := []struct {
		name string
		run  func() (expected int, err error)
	}{
		{"cold-start", func() (int, error) { return 0, c.Start() }},
		{"kill-1", func() (int, error) {
			n := sc.owns(victim)
			logf("kill %s (%d units)", victim, n)
			return n, c.Kill(victim)
		}},
		{"join-1", func() (int, error) {
			logf("%s joins as a new process", victim)
			if err := c.Restart(victim); err != nil {
				return 0, err
			}
			return sc.target(victim), nil
		}},
		{"rolling-restart", sc.rolling},
	}
	for _, st := range steps {
		row, err := sc.scenario(st.name, st.run)
		if err != nil {
			return res, fmt.Errorf("testkit: scale %s: %w", st.name, err)
		}
		res.Rows = append(res.Rows, row)
		logf("%s", row.String())
		if !row.Settled {
			break
		}
	}
	if !c.Settle(cfg.Limit) {
		res.Violations = append(res.Violations, Violation{"settle", "the sample messages were not all applied"})
	}
	rep := c.Report()
	res.Digest, res.Applied, res.Lost, res.Duplicated = c.Digest(), rep.Applied, rep.Lost, rep.Duplicated
	res.Violations = append(res.Violations, rep.Violations...)
	res.PlaceComputed, res.PlaceSpent = c.scale.memo.computed, c.scale.memo.spent
	return res, nil
}

// scaleRun is the state of one Scale run.
type scaleRun struct {
	c     *Cluster
	cfg   ScaleConfig
	wl    *Workload
	units [][]string // per source, sorted
	round int        // scenarios begun, for the sample
	// placed is the placement among the running nodes after the last
	// step, mustMove the units it moved since the scenario began (step).
	placed   map[string]string
	mustMove int
	logf     func(string, ...any)
}

// scenario runs one scenario: the sample messages, its steps, until
// settled, then the steady window.
func (sc *scaleRun) scenario(name string, run func() (int, error)) (ScaleRow, error) {
	c, s := sc.c, sc.c.scale
	s.takeChanges() // what came before is not this scenario's
	sc.publishSample()
	row := ScaleRow{Scenario: name}
	moved, stmts, t0 := s.moved, s.leaseStmts, c.Now()
	sc.mustMove, sc.placed = 0, sc.assignment()
	exp, err := run()
	if err != nil {
		return row, err
	}
	row.NodeUnits = exp
	row.Settled = sc.settle()
	if row.Settled && sc.cfg.Inspect != nil {
		sc.cfg.Inspect(name, c)
	}
	sc.step()
	row.MustMove = sc.mustMove
	row.Took = c.Now().Sub(t0)
	row.Moved, row.LeaseStmts = s.moved-moved, s.leaseStmts-stmts
	ch := s.takeChanges()
	row.Changes = len(ch)
	for _, d := range ch {
		row.PlaceMean += d
		row.PlaceMax = max(row.PlaceMax, d)
	}
	if len(ch) > 0 {
		row.PlaceMean /= time.Duration(len(ch))
	}
	if row.Settled {
		before := s.leaseStmts
		c.Run(sc.cfg.Steady)
		row.SteadyRate = float64(s.leaseStmts-before) / sc.cfg.Steady.Seconds()
	}
	return row, nil
}

// publishSample publishes one message to one unit in scaleSample, a
// different one each scenario.
func (sc *scaleRun) publishSample() {
	k := sc.round % scaleSample
	sc.round++
	for i, units := range sc.units {
		src := "src" + strconv.Itoa(i)
		for p := k; p < len(units); p += scaleSample {
			m, _ := sc.wl.Next()
			_, _ = sc.c.Publish(src, strconv.Itoa(p), m)
		}
	}
}

// settle runs until every unit is placed once (checked every 100 ms of
// virtual time), at most the limit.
func (sc *scaleRun) settle() bool {
	for end := sc.c.Now().Add(sc.cfg.Limit); ; {
		if sc.placedOnce() {
			return true
		}
		if !sc.c.Now().Before(end) {
			return false
		}
		sc.c.Run(100 * time.Millisecond)
	}
}

// rolling is the rolling restart: a wave of nodes stops gracefully, starts
// again once stopped, and the next wave begins once every unit is placed
// once again.
func (sc *scaleRun) rolling() (int, error) {
	c := sc.c
	for i := 0; i < len(c.order); i += sc.cfg.Wave {
		wave := c.order[i:min(i+sc.cfg.Wave, len(c.order))]
		for _, n := range wave {
			if err := c.Stop(n); err != nil {
				return 0, err
			}
		}
		stopped := func() bool {
			for _, n := range wave {
				if !c.Stopped(n) {
					return false
				}
			}
			return true
		}
		if !c.RunUntil(stopped, sc.cfg.Limit) {
			return 0, fmt.Errorf("wave %v did not stop within %s", wave, sc.cfg.Limit)
		}
		sc.step()
		c.Run(sc.cfg.Down)
		for _, n := range wave {
			if err := c.Restart(n); err != nil {
				return 0, err
			}
		}
		if !sc.settle() {
			return 0, fmt.Errorf("wave %v did not settle within %s", wave, sc.cfg.Limit)
		}
		sc.logf("rolling restart: %s..%s back at %s", wave[0], wave[len(wave)-1], c.Now().Sub(epoch).Round(time.Millisecond))
	}
	return 0, nil
}

// placedOnce reports whether every unit is owned exactly once where
// placement among the running nodes puts it: listed in the tree of one
// running node only, running there, and leased to it in the store.
func (sc *scaleRun) placedOnce() bool {
	c := sc.c
	where := make(map[string]string, sc.cfg.Units)
	ok := true
	members := sc.members()
	for _, m := range members {
		name := m.Name
		c.nodes[name].node.UnitStates(func(_, _, unit, state string) {
			if _, dup := where[unit]; dup || state != actors.StateRunning {
				ok = false
			}
			where[unit] = name
		})
	}
	if !ok || len(where) != sc.cfg.Units {
		return false
	}
	leases, err := c.inner.List(context.Background())
	if err != nil {
		return false
	}
	held := make(map[string]persistence.Lease, len(leases))
	for _, l := range leases {
		held[l.Unit] = l
	}
	now := c.Now()
	return sc.eachPlaced(members, func(u, owner string) bool {
		l := held[u]
		return where[u] == owner && l.Owner == owner && l.ExpiresAt.After(now)
	})
}

// eachPlaced calls f with every unit and its owner by placement among
// members, until f returns false; it reports whether f always returned
// true.
func (sc *scaleRun) eachPlaced(members []placement.Member, f func(unit, owner string) bool) bool {
	limit := placement.EffectiveMaxCapacity(members, 0)
	for _, units := range sc.units {
		for owner, own := range sc.c.scale.memo.assign(units, members, limit).owned {
			for _, u := range own {
				if !f(u, owner) {
					return false
				}
			}
		}
	}
	return true
}

// assignment is placement among the running nodes (alive, not paused):
// unit -> node.
func (sc *scaleRun) assignment() map[string]string {
	out := make(map[string]string, sc.cfg.Units)
	sc.eachPlaced(sc.members(), func(u, owner string) bool {
		out[u] = owner
		return true
	})
	return out
}

// step adds to mustMove the units placement moved since the last step.
func (sc *scaleRun) step() {
	now := sc.assignment()
	for u, owner := range now {
		if prev, ok := sc.placed[u]; ok && prev != owner {
			sc.mustMove++
		}
	}
	sc.placed = now
}

// members are the running nodes as placement sees them, sorted by name.
func (sc *scaleRun) members() []placement.Member {
	c := sc.c
	var members []placement.Member
	for _, name := range c.order {
		if n := c.nodes[name]; n.state == "running" && !c.s.isPaused(n.sid) {
			members = append(members, c.w.members[name].member())
		}
	}
	slices.SortFunc(members, func(a, b placement.Member) int { return strings.Compare(a.Name, b.Name) })
	return members
}

// owns counts the units node owns in its tree now.
func (sc *scaleRun) owns(node string) int {
	n := 0
	if nd := sc.c.nodes[node]; nd.node != nil {
		nd.node.UnitStates(func(string, string, string, string) { n++ })
	}
	return n
}

// target counts the units placement among the running nodes gives node.
func (sc *scaleRun) target(node string) int {
	n := 0
	sc.eachPlaced(sc.members(), func(_, owner string) bool {
		if owner == node {
			n++
		}
		return true
	})
	return n
}

// ScaleHeader is the header of the scale table; String formats a row under
// it.
const ScaleHeader = "scenario         settled_s   moved  must_move  node_units  lease_stmts  lease/s  steady_lease/s  changes  place_cpu_ms_mean  place_cpu_ms_max"

func (r ScaleRow) String() string {
	settled := fmt.Sprintf("%9.1f", r.Took.Seconds())
	if !r.Settled {
		settled = fmt.Sprintf("%9s", ">"+strconv.FormatFloat(r.Took.Seconds(), 'f', 0, 64))
	}
	rate := 0.0
	if r.Took > 0 {
		rate = float64(r.LeaseStmts) / r.Took.Seconds()
	}
	return fmt.Sprintf("%-16s %s %7d %10d %11d %12d %8.0f %15.1f %8d %18.2f %17.2f", r.Scenario, settled, r.Moved, r.MustMove, r.NodeUnits,
		r.LeaseStmts, rate, r.SteadyRate, r.Changes, ms(r.PlaceMean), ms(r.PlaceMax))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Table is the run as `drover sim --scale` prints it: a line of
// parameters, the header, a row per scenario, and the summary line.
func (r ScaleResult) Table() string {
	var b strings.Builder
	cfg := r.Config
	fmt.Fprintf(&b, "nodes=%d units=%d sources=%d wave=%d seed=%d\n", cfg.Nodes, cfg.Units, cfg.Sources, cfg.Wave, cfg.Seed)
	b.WriteString(ScaleHeader + "\n")
	for _, row := range r.Rows {
		b.WriteString(row.String() + "\n")
	}
	fmt.Fprintf(&b, "placement computed %d times in %.2f s of CPU (the nodes share them)\n", r.PlaceComputed, r.PlaceSpent.Seconds())
	writeViolations(&b, r.Violations)
	fmt.Fprintf(&b, "seed=%d digest=%s applied=%d lost=%d duplicated=%d\n", cfg.Seed, r.Digest, r.Applied, r.Lost, r.Duplicated)
	return b.String()
}
