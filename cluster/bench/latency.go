package bench

import (
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
// lats, for each message a checkpoint newly covers, the time of that read
// minus the message's timestamp. It returns once total (sent when the
// producer is done) messages are measured, or 60 s after total arrives.
func (e *env) pollLatencies(ctx context.Context, source string, pub *published, total <-chan int, nodes *nodeSet, lats *[]time.Duration) error {
	next := make([]int, len(pub.base)) // next index into pub.ts[p] to measure
	want := -1
	var deadline <-chan time.Time
	poll := time.NewTicker(latencyPoll)
	defer poll.Stop()
	for want < 0 || len(*lats) < want {
		cps, err := e.store.Checkpoints(ctx, source)
		seen := time.Now()
		if err == nil {
			at := positions(source, cps)
			pub.mu.Lock()
			for p := range next {
				off, ok := at[p]
				if !ok {
					continue
				}
				for ; next[p] < len(pub.ts[p]) && pub.base[p]+int64(next[p]) <= off; next[p]++ {
					ts := pub.ts[p][next[p]]
					if ts.IsZero() { // its produce callback has not run yet
						break
					}
					*lats = append(*lats, seen.Sub(ts))
				}
			}
			pub.mu.Unlock()
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
