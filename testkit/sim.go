package testkit

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/persistence"
)

// SimOptions tune RandomRun.
type SimOptions struct {
	// Store opens the store under test; nil is the in-memory store.
	Store func(*Clock) (persistence.Store, error)
	// BreakFencing switches off the memory store's token check, to show
	// the simulation catches what fencing prevents. Memory store only.
	BreakFencing bool
	// Log, when set, receives one line per scenario step.
	Log func(string)
	// Inspect, when set, is called with the cluster after it settled and
	// before the invariants are checked (to look at its event log).
	Inspect func(*Cluster)
}

// SimResult is the outcome of one random run.
type SimResult struct {
	Seed       uint64
	Digest     string
	Applied    int64
	Lost       int
	Duplicated int
	Violations []Violation
	Steps      []string // the scenario, for a replay hint
	Settled    bool
}

// Line is the run's summary line, as `drover sim` prints it.
func (r SimResult) Line() string {
	return fmt.Sprintf("seed=%d digest=%s applied=%d lost=%d duplicated=%d", r.Seed, r.Digest, r.Applied, r.Lost, r.Duplicated)
}

// OK reports whether every invariant held.
func (r SimResult) OK() bool {
	return r.Settled && r.Lost == 0 && r.Duplicated == 0 && len(r.Violations) == 0
}

// RandomRun draws a whole scenario from seed — nodes, sources of both
// shapes, messages of every kind, kills, graceful stops, partitions, pauses,
// broker and store faults, a reshard — runs it, lets the cluster settle and
// checks every invariant.
func RandomRun(seed uint64, opt SimOptions) (SimResult, error) {
	rng := rand.New(rand.NewPCG(seed, ^seed))
	nodes := 2 + rng.IntN(4)
	c, err := New(Config{Seed: seed, Nodes: nodes, Detection: time.Second, Store: opt.Store, FailoverBound: 3 * time.Second})
	if err != nil {
		return SimResult{}, err
	}
	defer c.Close()
	if opt.BreakFencing {
		if c.MemoryStore() == nil {
			return SimResult{}, fmt.Errorf("testkit: BreakFencing needs the memory store")
		}
		c.MemoryStore().BreakFencing(true)
	}
	res := SimResult{Seed: seed}
	step := func(at time.Duration, f string, a ...any) {
		s := fmt.Sprintf("t=%s ", at.Round(time.Millisecond)) + fmt.Sprintf(f, a...)
		res.Steps = append(res.Steps, s)
		if opt.Log != nil {
			opt.Log(s)
		}
	}

	parts := 2 + rng.IntN(7)
	stream := actors.SourceSpec{Name: "orders", Type: "memory", KeyField: "id", BatchSize: 20 + rng.IntN(200), MaxWait: 200 * time.Millisecond, MaxMessageBytes: 4096}
	st, err := c.AddStream(stream, parts)
	if err != nil {
		return res, err
	}
	hasQueue := rng.IntN(10) < 7
	if hasQueue {
		q := actors.SourceSpec{Name: "jobs", Type: "memory", KeyField: "id", Slots: 1 + rng.IntN(4), BatchSize: 10 + rng.IntN(50), MaxWait: 200 * time.Millisecond, MaxMessageBytes: 4096}
		if _, err := c.AddQueue(q, 2*time.Second+time.Duration(rng.IntN(3000))*time.Millisecond); err != nil {
			return res, err
		}
	}
	step(0, "nodes=%d partitions=%d batch=%d queue=%v", nodes, parts, stream.BatchSize, hasQueue)
	if err := c.Start(); err != nil {
		return res, err
	}

	open := make([]string, parts)
	for i := range open {
		open[i] = strconv.Itoa(i)
	}
	wl := NewWorkload(seed)
	wl.MaxBytes = 4096
	qwl := NewWorkload(seed + 1)
	qwl.MaxBytes, qwl.Tombstones = 4096, false

	// publishing: bursts over the first 20 s
	total := 300 + rng.IntN(1200)
	bursts := 10 + rng.IntN(20)
	for b := 0; b < bursts; b++ {
		at := time.Duration(rng.Int64N(int64(20 * time.Second)))
		n := total / bursts
		c.At(at, func() {
			byPart := map[string][]brokers.Message{}
			for i := 0; i < n; i++ {
				m, _ := wl.Next()
				p := open[int(hashKey(m.Key))%len(open)]
				byPart[p] = append(byPart[p], m)
			}
			for _, p := range sortedStrings(byPart) {
				_, _ = c.Publish("orders", p, byPart[p]...)
			}
			if hasQueue {
				_, _ = c.Publish("jobs", "", qwl.Batch(n/3+1)...)
			}
		})
	}

	// faults
	names := c.Nodes()
	faults := 2 + rng.IntN(5)
	down := map[string]bool{} // nodes planned down at some time: keep one up
	for f := 0; f < faults; f++ {
		at := 2*time.Second + time.Duration(rng.Int64N(int64(22*time.Second)))
		name := names[rng.IntN(len(names))]
		switch k := rng.IntN(9); k {
		case 0, 1: // kill, maybe restart
			if len(down)+1 >= len(names) || down[name] {
				continue
			}
			down[name] = true
			back := time.Duration(2000+rng.IntN(6000)) * time.Millisecond
			restart := rng.IntN(10) < 7
			step(at, "kill %s (restart after %s: %v)", name, back, restart)
			c.At(at, func() { _ = c.Kill(name) })
			if restart {
				c.At(at+back, func() { _ = c.Restart(name) })
			}
		case 2: // graceful stop, restart
			if len(down)+1 >= len(names) || down[name] {
				continue
			}
			down[name] = true
			back := time.Duration(3000+rng.IntN(5000)) * time.Millisecond
			step(at, "stop %s gracefully, restart after %s", name, back)
			c.At(at, func() { _ = c.Stop(name) })
			c.At(at+back, func() {
				if c.Stopped(name) {
					_ = c.Restart(name)
				}
			})
		case 3: // partition
			d := time.Duration(500+rng.IntN(6000)) * time.Millisecond
			step(at, "partition %s for %s", name, d)
			c.At(at, func() { _ = c.Partition(name) })
			c.At(at+d, func() { _ = c.Heal(name) })
		case 4: // pause (GC), sometimes past the lease
			d := time.Duration(300+rng.IntN(14000)) * time.Millisecond
			step(at, "pause %s for %s", name, d)
			c.At(at, func() { _ = c.Pause(name) })
			c.At(at+d, func() { _ = c.Resume(name) })
		case 5: // broker fault
			n := 1 + rng.IntN(7)
			step(at, "stream fetch fails %d times", n)
			c.At(at, func() {
				c.Disturb("broker")
				st.FailNext("fetch", n, nil)
			})
			c.At(at+10*time.Second, func() { c.Undisturb("broker") })
		case 6: // store fault
			switch rng.IntN(3) {
			case 0:
				n := 1 + rng.IntN(6)
				step(at, "store apply fails %d times", n)
				c.At(at, func() { c.Disturb("store"); c.StoreFaults().FailNext("apply", n) })
				c.At(at+10*time.Second, func() { c.Undisturb("store") })
			case 1:
				d := time.Duration(300+rng.IntN(4000)) * time.Millisecond
				step(at, "store down for %s", d)
				c.At(at, func() { c.Disturb("store"); c.StoreFaults().SetDown(true) })
				c.At(at+d, func() { c.StoreFaults().SetDown(false) })
				c.At(at+d+10*time.Second, func() { c.Undisturb("store") })
			default:
				n := 1 + rng.IntN(3)
				step(at, "store commits then fails %d times", n)
				c.At(at, func() { c.Disturb("store"); c.StoreFaults().FailAfterCommit(n) })
				c.At(at+10*time.Second, func() { c.Undisturb("store") })
			}
		case 7: // reshard
			step(at, "split a partition")
			pick := rng.IntN(1 << 20)
			c.At(at, func() {
				p := open[pick%len(open)]
				kids, err := c.Split("orders", p)
				if err != nil {
					return
				}
				rest := open[:0:0]
				for _, o := range open {
					if o != p {
						rest = append(rest, o)
					}
				}
				open = append(rest, kids...)
			})
		case 8: // queue fault
			if !hasQueue {
				continue
			}
			n := 1 + rng.IntN(5)
			step(at, "queue drops %d acks", n)
			c.At(at, func() { _ = c.DropAcks("jobs", n) })
		}
	}

	sort.SliceStable(res.Steps, func(i, j int) bool { return stepTime(res.Steps[i]) < stepTime(res.Steps[j]) })
	c.Run(30 * time.Second)
	res.Settled = c.Settle(3 * time.Minute)
	if opt.Inspect != nil {
		opt.Inspect(c)
	}
	rep := c.Report()
	res.Digest, res.Applied, res.Lost, res.Duplicated, res.Violations = c.Digest(), rep.Applied, rep.Lost, rep.Duplicated, rep.Violations
	if !res.Settled && len(res.Violations) == 0 && rep.Lost == 0 {
		res.Violations = append(res.Violations, Violation{"settle", "the cluster did not settle within 3 minutes of virtual time"})
	}
	return res, nil
}

func hashKey(k []byte) uint32 {
	var h uint32 = 2166136261
	for _, b := range k {
		h = (h ^ uint32(b)) * 16777619
	}
	return h
}

func sortedStrings[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Explain formats a failed run for humans: the broken invariants, the
// scenario, and how to replay it.
func (r SimResult) Explain() string {
	var b strings.Builder
	for i, v := range r.Violations {
		if i == 10 {
			fmt.Fprintf(&b, "... and %d more broken invariants\n", len(r.Violations)-10)
			break
		}
		fmt.Fprintf(&b, "invariant broken: %s\n", v)
	}
	b.WriteString("scenario:\n")
	for _, s := range r.Steps {
		fmt.Fprintf(&b, "  %s\n", s)
	}
	fmt.Fprintf(&b, "replay: drover sim --seed %d -v\n", r.Seed)
	return b.String()
}

func stepTime(s string) time.Duration {
	f := strings.Fields(s)
	if len(f) == 0 {
		return 0
	}
	d, _ := time.ParseDuration(strings.TrimPrefix(f[0], "t="))
	return d
}
