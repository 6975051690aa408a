package testkit

import (
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/drover-dev/drover/actors"
)

// simKPL is the "kpl" stream of a random run, nil when the seed has none.
type simKPL struct {
	rng *rand.Rand
	wl  *Workload
	// recs are the records published, by partition: their offsets and
	// user records (0: a plain record), for the seeks to sub-positions
	// they do not have (simkplseek.go)
	recs   map[string][]kplRecord
	policy actors.ResetPolicy
}

// drawKPL puts a stream of KPL-style aggregates into a random run (issue
// 14 item 3), drawn from a source of its own so that the rest of the
// scenario is as without it: on 3 seeds in 10, a records stream "kpl" of 1
// to 3 partitions with batch_size 2 to 8, smaller than most of its
// aggregates, so that batches, checkpoints and the kills, takeovers and
// handovers of the run fall inside aggregates. The ledger expects each
// user record at its sub-position "<offset>/<index>" exactly once, in
// order, like any other message. tune fits the source to the run's store;
// its on_position_reset is drawn apart (kplResetPolicy), for the seeks to
// sub-positions its records do not have (simkplseek.go).
func drawKPL(c *Cluster, seed uint64, tune func(*actors.SourceSpec), step func(time.Duration, string, ...any)) (*simKPL, error) {
	rng := rand.New(rand.NewPCG(seed^0xa66, seed+0xa67))
	if rng.IntN(10) >= 3 {
		return nil, nil
	}
	sp := actors.SourceSpec{Name: "kpl", Type: "memory", KeyField: "id", BatchSize: 2 + rng.IntN(7), MaxWait: 200 * time.Millisecond, MaxMessageBytes: 4096}
	tune(&sp) // fitted to a store that takes little per batch, as orders is
	sp.OnPositionReset = kplResetPolicy(seed)
	parts := 1 + rng.IntN(3)
	if _, err := c.AddStream(sp, parts); err != nil {
		return nil, err
	}
	step(0, "stream kpl: %d partitions of KPL aggregates, batch %d, on_position_reset %s", parts, sp.BatchSize, sp.OnPositionReset)
	wl := NewWorkload(seed ^ 0xa66)
	wl.MaxBytes = 4096
	return &simKPL{rng: rng, wl: wl, recs: map[string][]kplRecord{}, policy: sp.OnPositionReset}, nil
}

// publish adds about n messages to every partition of the kpl stream:
// aggregates of 1 to 12 user records, plain records, and now and then a
// corrupt aggregate (a message the adapter rejects, as the Kinesis reader
// does one whose checksum fails), which must become one dead letter.
func (k *simKPL) publish(c *Cluster, n int) {
	if k == nil {
		return
	}
	for _, p := range c.OpenPartitions("kpl") {
		for left := n; left > 0; {
			switch d := k.rng.IntN(10); {
			case d < 6:
				size := min(1+k.rng.IntN(12), left)
				pos, _ := c.PublishAggregate("kpl", p, k.wl.Batch(size)...)
				k.note(p, pos, size)
				left -= size
			case d < 9:
				pos, _ := c.Publish("kpl", p, k.wl.Batch(1)...)
				k.note(p, pos, 0)
				left--
			default:
				m := k.wl.Batch(1)[0]
				m.Reject = "KPL aggregate: MD5 checksum mismatch (simulated " + strconv.Itoa(left) + ")"
				pos, _ := c.Publish("kpl", p, m)
				k.note(p, pos, 0)
				left--
			}
		}
	}
}
