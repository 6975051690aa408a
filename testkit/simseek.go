package testkit

import (
	"context"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/drover-dev/drover/actors"
)

// drawSeeks puts operators' seeks back into a random run (issue 13 item
// 2), drawn from a source of their own so that the rest of the scenario is
// as without them: on 4 seeds in 10, one or two seeks of a random open
// orders unit, at 3 to 28 s, back 1 to 100 positions from its checkpoint
// then (or to earliest, 1 in 5). Each comes 0 to 100 ms after a burst of
// two to three batches published to that unit, so that it often meets an
// apply in flight and a batch fetched ahead. The ledger then allows
// exactly the re-applies each seek back asks for (seek.go): "duplicated"
// fires only beyond them and "reapplied" when one did not happen. No seek
// once the stream was recreated (its positions are reused; which
// incarnation a seek means is the operator's call, not the ledger's) or
// while a unit has no running holder (the seek is then refused, and
// changes nothing). Half of the seeks, drawn from a third source (so the
// draws above are as they were), are asked through a random node's
// control row instead (Cluster.SeekVia): the owner picks the row up at a
// renewal round; carried out more than once, a reset without a cause
// breaks the ledger's resolved-once.
func drawSeeks(c *Cluster, seed uint64, batch, maxBytes int, step func(time.Duration, string, ...any)) {
	rng := rand.New(rand.NewPCG(seed^0x5ee, seed+0x5ef))
	if rng.IntN(10) >= 4 {
		return
	}
	via := rand.New(rand.NewPCG(seed^0x5e0, seed+0x5e1))
	wl := NewWorkload(seed ^ 0x5ee)
	wl.MaxBytes = maxBytes
	for n := 1 + rng.IntN(2); n > 0; n-- {
		at := 3*time.Second + time.Duration(rng.Int64N(int64(25*time.Second)))
		pick, back, earliest := rng.IntN(1<<20), 1+rng.IntN(100), rng.IntN(5) == 0
		burst, delay := 2*batch+rng.IntN(batch+1), time.Duration(rng.IntN(100))*time.Millisecond
		row, node := via.IntN(2) == 0, via.IntN(1<<20)
		how := "its owner"
		if row {
			how = "the control row"
		}
		step(at, "publish %d to an orders unit and seek it back %d positions %s later (earliest: %v) through %s", burst, back, delay, earliest, how)
		c.At(at, func() {
			open := c.OpenPartitions("orders")
			if len(open) == 0 || c.led.gen["orders"] > 0 || c.AwaitingReset("orders") {
				return
			}
			part := open[pick%len(open)]
			_, _ = c.Publish("orders", part, wl.Batch(burst)...)
			through := ""
			if names := c.Nodes(); row {
				through = names[node%len(names)]
			}
			c.At(delay, func() { c.seekBack("orders/"+part, back, earliest, through) })
		})
	}
}

// seekBack seeks unit back n positions from its checkpoint, or to
// earliest: through its owner, or through node via's control row.
func (c *Cluster) seekBack(unit string, n int, earliest bool, via string) {
	if c.led.gen[sourceOf(unit)] > 0 || c.AwaitingReset(sourceOf(unit)) {
		return
	}
	to := "earliest"
	if !earliest {
		cp, err := c.inner.Checkpoint(context.Background(), unit)
		p, perr := strconv.ParseInt(cp.Position, 10, 64)
		if err != nil || perr != nil {
			return // nothing applied yet
		}
		to = strconv.FormatInt(max(0, p+1-int64(n)), 10)
	}
	if via != "" {
		_, _ = c.SeekVia(via, actors.Seek{Unit: unit, To: to, By: "sim"})
		return
	}
	_ = c.Seek(actors.Seek{Unit: unit, To: to, By: "sim"}, nil)
}

// simSeekExpiry is the seek expiry of the random runs (Tuning.SeekExpiry):
// short, so that drawExpiringSeek's seeks expire within a run.
const simSeekExpiry = 10 * time.Second

// drawClockAhead draws, from a source of its own, on a quarter of the
// seeds one node of nodes whose clock runs 1 min to 2 h ahead of the
// virtual clock the store keeps (Config.ClockAhead): a seek's age is the
// store's, so that node must expire no seek early (checkExpiredSeek).
func drawClockAhead(seed uint64, nodes int) map[string]time.Duration {
	rng := rand.New(rand.NewPCG(seed^0xc10c, seed+0xc10d))
	if rng.IntN(4) != 0 {
		return nil
	}
	node := "node-" + strconv.Itoa(1+rng.IntN(nodes))
	return map[string]time.Duration{node: time.Minute + time.Duration(rng.Int64N(int64(119*time.Minute)))}
}

// drawExpiringSeek puts a seek that may expire into a random run (issue
// 13 item 2, review), from a source of its own (the other draws stay as
// they were): on a quarter of the seeds, at 3 to 20 s, a seek to earliest
// asked through a random node's control row of the orders partition that
// is not there yet (the next one the stream adds), and that partition
// added, with a burst, 6 s to 45 s later (the expiry is 10 s, its grace
// 30 s more). Added in time, its first owner carries the seek out (a
// reset the ledger accepts); added later, the owner must find the seek
// expired under its lease and mark it done (before the grace ends), or
// the nodes' renewal rounds have marked it (after): carried out past the
// expiry, the seek-expiry invariant fires (seek.go).
func drawExpiringSeek(c *Cluster, seed uint64, maxBytes int, step func(time.Duration, string, ...any)) {
	rng := rand.New(rand.NewPCG(seed^0xe5e, seed+0xe5f))
	if rng.IntN(4) != 0 {
		return
	}
	at := 3*time.Second + time.Duration(rng.Int64N(int64(17*time.Second)))
	later := 6*time.Second + time.Duration(rng.Int64N(int64(39*time.Second)))
	node, burst := rng.IntN(1<<20), 1+rng.IntN(60)
	wl := NewWorkload(seed ^ 0xe5e)
	wl.MaxBytes = maxBytes
	step(at, "seek the orders partition not there yet to earliest through a control row; the partition added %s later with %d messages (seek expiry %s)",
		later, burst, simSeekExpiry)
	c.At(at, func() {
		st := c.Stream("orders")
		if st == nil || c.led.gen["orders"] > 0 {
			return
		}
		names := c.Nodes()
		unit := "orders/" + st.NextID()
		if _, err := c.SeekVia(names[node%len(names)], actors.Seek{Unit: unit, To: "earliest", By: "sim"}); err != nil {
			return
		}
		c.At(later, func() {
			if c.led.gen["orders"] > 0 {
				return
			}
			ids, err := c.AddPartitions("orders", 1)
			if err == nil {
				_, _ = c.Publish("orders", ids[0], wl.Batch(burst)...)
			}
		})
	})
}
