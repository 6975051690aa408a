package demo

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"time"
)

// The chaos of `drover demo --chaos`: every ChaosMinEvery–ChaosMaxEvery
// one action on a random node — kill -9, SIGTERM, restart, or cut its
// store connections for ChaosMinCut–ChaosMaxCut — while the producer runs.
// At least one node process always runs: a node is killed or stopped only
// while two or more run (a node being stopped by SIGTERM does not count as
// running). One store cut at a time; a node whose store is cut is not
// restarted until the cut ends (it could not open its store).
const (
	ChaosMinEvery = 2 * time.Second
	ChaosMaxEvery = 8 * time.Second
	ChaosMinCut   = 2 * time.Second
	ChaosMaxCut   = 6 * time.Second
	// ChaosTermLimit is how long a SIGTERMed node may take to stop before
	// it is killed -9 (the demo's nodes run with --grace 20s).
	ChaosTermLimit = 25 * time.Second
)

// ChaosCounts counts the chaos actions taken during the chaos window (the
// restarts at its end are not counted).
type ChaosCounts struct {
	Kills, Terms, Restarts, Cuts int
}

type chaosKind int

const (
	chaosKill chaosKind = iota
	chaosTerm
	chaosRestart
	chaosCut
	chaosKinds
)

type nodeState int

const (
	nodeUp       nodeState = iota
	nodeStopping           // SIGTERM sent, not ended yet
	nodeDown
)

// chaos drives the actions. Its randomness comes from the seed alone:
// the intervals from one stream, which action and which node from another,
// so that the times of the actions do not depend on what the nodes did.
type chaos struct {
	c       *Cluster
	sampler *Sampler
	start   time.Time
	every   *rand.Rand // intervals between actions (only the chaos loop uses it)
	pick    *rand.Rand // kinds, nodes, cut lengths (only the chaos loop uses it)

	stop     chan struct{} // closed by finish: end cuts now
	stopOnce sync.Once
	wg       sync.WaitGroup // SIGTERMs and cuts in flight

	mu       sync.Mutex
	state    map[*Node]nodeState
	cut      *Node // the node whose store is cut, or nil
	counts   ChaosCounts
	problems []string
}

func (c *Cluster) newChaos(s *Sampler, seed uint64, start time.Time) *chaos {
	ch := &chaos{
		c: c, sampler: s, start: start,
		every: rand.New(rand.NewPCG(seed, 0x6368616f73)), // "chaos"
		pick:  rand.New(rand.NewPCG(seed, 0x7069636b)),   // "pick"
		stop:  make(chan struct{}),
		state: map[*Node]nodeState{},
	}
	for _, n := range c.nodes {
		st := nodeUp
		if !n.Running() {
			st = nodeDown
		}
		ch.state[n] = st
	}
	return ch
}

func (ch *chaos) logf(f string, a ...any) {
	fmt.Fprintf(ch.c.log, "chaos: "+f+" at %s\n", append(a, time.Since(ch.start).Round(100*time.Millisecond))...)
}

// run acts every ChaosMinEvery–ChaosMaxEvery until ctx ends.
func (ch *chaos) run(ctx context.Context) {
	for {
		d := ChaosMinEvery + time.Duration(ch.every.Int64N(int64(ChaosMaxEvery-ChaosMinEvery)+1))
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		ch.act(ctx)
	}
}

// act takes one action: a kind never taken yet when one is possible (so
// that a short run takes each), else a random one, restarts weighted by
// how many nodes are down.
func (ch *chaos) act(ctx context.Context) {
	ch.noticeExits()
	ch.mu.Lock()
	var up, down []*Node
	for _, n := range ch.c.nodes {
		switch ch.state[n] {
		case nodeUp:
			up = append(up, n)
		case nodeDown:
			if ch.cut != n {
				down = append(down, n)
			}
		}
	}
	weight := [chaosKinds]int{}
	if len(up) >= 2 {
		weight[chaosKill], weight[chaosTerm] = 1, 1
	}
	if len(down) > 0 {
		weight[chaosRestart] = len(down)
	}
	if ch.cut == nil && len(up) > 0 {
		weight[chaosCut] = 1
	}
	done := [chaosKinds]int{ch.counts.Kills, ch.counts.Terms, ch.counts.Restarts, ch.counts.Cuts}
	ch.mu.Unlock()

	var fresh []chaosKind
	total := 0
	for k := range chaosKinds {
		if weight[k] > 0 && done[k] == 0 {
			fresh = append(fresh, k)
		}
		total += weight[k]
	}
	if total == 0 {
		return // nothing possible now (a SIGTERM still in flight)
	}
	var kind chaosKind
	if len(fresh) > 0 {
		kind = fresh[ch.pick.IntN(len(fresh))]
	} else {
		r := ch.pick.IntN(total)
		for kind = 0; r >= weight[kind]; kind++ {
			r -= weight[kind]
		}
	}
	switch kind {
	case chaosKill:
		ch.kill(ctx, up[ch.pick.IntN(len(up))])
	case chaosTerm:
		ch.term(up[ch.pick.IntN(len(up))])
	case chaosRestart:
		ch.restart(down[ch.pick.IntN(len(down))], false)
	case chaosCut:
		d := ChaosMinCut + time.Duration(ch.pick.Int64N(int64(ChaosMaxCut-ChaosMinCut)+1))
		ch.cutStore(up[ch.pick.IntN(len(up))], d.Round(100*time.Millisecond))
	}
}

// noticeExits marks down the nodes that ended without being told to, a
// finding: a node process must not exit by itself.
func (ch *chaos) noticeExits() {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	for _, n := range ch.c.nodes {
		if ch.state[n] == nodeUp && !n.Running() {
			ch.state[n] = nodeDown
			p := fmt.Sprintf("%s exited by itself (%v); its log ends: %s", n.Name, n.ExitError(), lastLine(n.LogPath))
			ch.problems = append(ch.problems, p)
			ch.logf("%s", p)
		}
	}
}

func (ch *chaos) kill(ctx context.Context, n *Node) {
	ch.sampler.Sample(ctx)
	ch.sampler.Killed(n.Name)
	ch.logf("kill -9 %s (pid %d)", n.Name, n.Pid())
	err := ch.c.Kill(n)
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.counts.Kills++
	if err != nil && n.Running() {
		ch.problems = append(ch.problems, fmt.Sprintf("kill -9 %s: %v", n.Name, err))
		return
	}
	ch.state[n] = nodeDown
}

func (ch *chaos) term(n *Node) {
	ch.mu.Lock()
	ch.state[n] = nodeStopping
	ch.counts.Terms++
	ch.mu.Unlock()
	ch.logf("sigterm %s (pid %d)", n.Name, n.Pid())
	ch.wg.Add(1)
	go func() {
		defer ch.wg.Done()
		err := ch.c.Term(n, ChaosTermLimit)
		if err != nil && n.Running() {
			ch.logf("%s still running %s after SIGTERM: kill -9", n.Name, ChaosTermLimit)
			ch.mu.Lock()
			ch.problems = append(ch.problems, fmt.Sprintf("%s did not stop within %s of SIGTERM", n.Name, ChaosTermLimit))
			ch.mu.Unlock()
			_ = ch.c.Kill(n)
		} else if e := n.ExitError(); e != nil {
			// a graceful stop can fail (its store cut, say): worth a line,
			// not a fault of the demo
			ch.logf("%s ended its graceful stop with %v; its log ends: %s", n.Name, e, lastLine(n.LogPath))
		}
		ch.mu.Lock()
		ch.state[n] = nodeDown
		ch.mu.Unlock()
	}()
}

// restart starts a stopped node; final restarts (at the end of the chaos
// window) are not counted.
func (ch *chaos) restart(n *Node, final bool) {
	if final {
		ch.logf("restart %s (the chaos is over)", n.Name)
	} else {
		ch.logf("restart %s", n.Name)
	}
	err := ch.c.StartNode(n)
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if !final {
		ch.counts.Restarts++
	}
	if err != nil {
		ch.problems = append(ch.problems, fmt.Sprintf("restart %s: %v", n.Name, err))
		return
	}
	ch.state[n] = nodeUp
	ch.sampler.Restarted(n.Name)
}

func (ch *chaos) cutStore(n *Node, d time.Duration) {
	if err := ch.c.CutStore(n); err != nil {
		ch.mu.Lock()
		ch.problems = append(ch.problems, err.Error())
		ch.mu.Unlock()
		return
	}
	ch.mu.Lock()
	ch.cut = n
	ch.counts.Cuts++
	ch.mu.Unlock()
	ch.logf("cut %s store %s", n.Name, d)
	ch.wg.Add(1)
	go func() {
		defer ch.wg.Done()
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ch.stop:
		}
		err := ch.c.RestoreStore(n)
		ch.mu.Lock()
		ch.cut = nil
		if err != nil {
			ch.problems = append(ch.problems, fmt.Sprintf("restore %s's store proxy: %v", n.Name, err))
		}
		ch.mu.Unlock()
		ch.logf("%s store back", n.Name)
	}()
}

// finish ends the chaos once run has returned: it ends the store cut in
// progress, waits for SIGTERMs in flight, and restarts every stopped node.
func (ch *chaos) finish() {
	ch.end()
	ch.noticeExits()
	for _, n := range ch.c.nodes {
		ch.mu.Lock()
		st := ch.state[n]
		ch.mu.Unlock()
		if st == nodeDown {
			ch.restart(n, true)
		}
	}
}

// end stops the goroutines of the chaos and waits for them; it may be
// called more than once.
func (ch *chaos) end() {
	ch.stopOnce.Do(func() { close(ch.stop) })
	ch.wg.Wait()
}

func (ch *chaos) result() (ChaosCounts, []string) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.counts, append([]string(nil), ch.problems...)
}

// lastLine is the last non-empty line of a file (clipped), for a message.
func lastLine(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	l := lines[len(lines)-1]
	if len(l) > 300 {
		l = l[:300] + "…"
	}
	return l
}
