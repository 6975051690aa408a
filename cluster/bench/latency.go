package bench

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// latencyPoll is how often the latency poller reads the checkpoints: the
// most a latency can be overstated by, besides the query itself.
const latencyPoll = 5 * time.Millisecond

type latResult struct {
	rate          int
	for_          time.Duration
	count         int
	p50, p99, max time.Duration
}

func (l *latResult) line() string {
	return fmt.Sprintf("latency: %d messages published at %d msg/s for %s: p50=%s p99=%s max=%s (record timestamp to the first checkpoint poll, every %s, that covers its offset)",
		l.count, l.rate, l.for_, ms(l.p50), ms(l.p99), ms(l.max), latencyPoll)
}

// published are the record timestamps of the messages produced during the
// latency figure, per partition, indexed by offset minus the partition's
// preloaded count.
type published struct {
	mu   sync.Mutex
	base []int64
	ts   [][]time.Time
}

func (p *published) add(part int, off int64, ts time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := int(off - p.base[part])
	for len(p.ts[part]) <= i {
		p.ts[part] = append(p.ts[part], time.Time{})
	}
	p.ts[part][i] = ts
}

// runLatency publishes at rate for Options.LatencyFor while the nodes run
// and measures every message's publish → commit latency.
func (e *env) runLatency(ctx context.Context, addr string, w *workload, source string, rate int, nodes *nodeSet) (*latResult, error) {
	pub := &published{base: make([]int64, w.partitions), ts: make([][]time.Time, w.partitions)}
	for p, ms := range w.byPart {
		pub.base[p] = int64(len(ms))
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		return nil, err
	}
	defer cl.Close()

	// the poller measures while the producer publishes
	type measured struct {
		lats []time.Duration
		err  error
	}
	total := make(chan int, 1) // how many were published, once done
	result := make(chan measured, 1)
	pctx, pcancel := context.WithCancel(ctx)
	polled := false // result was read
	defer func() {
		// on every return the poller is done before the nodes and the
		// store it queries are closed
		pcancel()
		if !polled {
			<-result
		}
	}()
	go func() {
		var m measured
		m.err = e.pollLatencies(pctx, source, pub, total, nodes, &m.lats)
		result <- m
	}()

	var (
		mu      sync.Mutex
		prodErr error
	)
	began := time.Now()
	produced := 0
	tick := time.NewTicker(time.Millisecond)
	for produced == 0 || time.Since(began) < e.o.LatencyFor {
		select {
		case <-ctx.Done():
			tick.Stop()
			return nil, ctx.Err()
		case <-tick.C:
		}
		due := max(1, int(float64(rate)*time.Since(began).Seconds()))
		for ; produced < due; produced++ {
			r := w.record(source, w.messages+produced)
			r.Timestamp = time.Now()
			cl.Produce(ctx, r, func(r *kgo.Record, err error) {
				if err != nil {
					mu.Lock()
					prodErr = err
					mu.Unlock()
					return
				}
				pub.add(int(r.Partition), r.Offset, r.Timestamp)
			})
		}
	}
	tick.Stop()
	if err := cl.Flush(ctx); err != nil {
		return nil, err
	}
	mu.Lock()
	err = prodErr
	mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("produce: %w", err)
	}
	total <- produced
	m := <-result
	polled = true
	if m.err != nil {
		return nil, m.err
	}
	lats := m.lats
	slices.Sort(lats)
	q := func(f float64) time.Duration { return lats[min(len(lats)-1, int(f*float64(len(lats))))] }
	return &latResult{rate: rate, for_: e.o.LatencyFor, count: len(lats), p50: q(0.50), p99: q(0.99), max: lats[len(lats)-1]}, nil
}

// pollLatencies reads the checkpoints every latencyPoll and appends to
// lats, for each message, the time of the first read whose checkpoint
// covered it minus the message's timestamp (coverage). It returns once
// total (sent when the producer is done) messages are measured, or 60 s
// after total arrives.
func (e *env) pollLatencies(ctx context.Context, source string, pub *published, total <-chan int, nodes *nodeSet, lats *[]time.Duration) error {
	cov := newCoverage(len(pub.base))
	want := -1
	var deadline <-chan time.Time
	poll := time.NewTicker(latencyPoll)
	defer poll.Stop()
	for want < 0 || len(*lats) < want {
		cps, err := e.store.Checkpoints(ctx, source)
		seen := time.Now()
		if err == nil {
			for p, off := range positions(source, cps) {
				cov.observe(p, off, seen)
			}
			cov.measure(pub, lats)
		}
		if dead := nodes.dead(); dead != nil {
			return dead
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case n := <-total:
			want = n
			deadline = time.After(60 * time.Second)
		case <-deadline:
			return fmt.Errorf("%d of %d published messages not applied within 60 s of the last publish", want-len(*lats), want)
		case <-poll.C:
		}
	}
	return nil
}

// coverage attributes to each published message the first checkpoint poll
// that covered its offset. A message's offset and timestamp are known only
// once its produce callback ran, which may be after a poll found it
// applied (the node fetched it from the broker before the producer heard
// back): so every poll that moved a partition's checkpoint is kept, as a
// mark, until the messages it covers are measured, and a message is
// measured against the first mark at or past its offset, not against the
// poll at which its timestamp became known (that overstated the latency
// of every message acknowledged late by up to the time its ack took).
type coverage struct {
	marks [][]mark // per partition, offsets increasing
	next  []int    // per partition, the next index into published.ts to measure
}

type mark struct {
	off  int64 // the checkpoint: messages at offsets up to it are applied
	seen time.Time
}

func newCoverage(partitions int) *coverage {
	return &coverage{marks: make([][]mark, partitions), next: make([]int, partitions)}
}

// observe records that a poll at seen read partition p's checkpoint at off.
func (c *coverage) observe(p int, off int64, seen time.Time) {
	if p < 0 || p >= len(c.marks) {
		return
	}
	if m := c.marks[p]; len(m) == 0 || off > m[len(m)-1].off {
		c.marks[p] = append(m, mark{off: off, seen: seen})
	}
}

// measure appends the latency of every message whose timestamp is known
// and that a mark covers, in offset order per partition, and forgets the
// marks no message left to measure needs.
func (c *coverage) measure(pub *published, lats *[]time.Duration) {
	pub.mu.Lock()
	defer pub.mu.Unlock()
	for p := range c.next {
		m := c.marks[p]
		for c.next[p] < len(pub.ts[p]) {
			off := pub.base[p] + int64(c.next[p])
			i, _ := slices.BinarySearchFunc(m, off, func(k mark, off int64) int { return cmp.Compare(k.off, off) })
			if i == len(m) {
				break // not applied yet
			}
			ts := pub.ts[p][c.next[p]]
			if ts.IsZero() { // its produce callback has not run yet: its marks stay
				break
			}
			*lats = append(*lats, m[i].seen.Sub(ts))
			c.next[p]++
			m = m[i:]
		}
		c.marks[p] = m
	}
}
