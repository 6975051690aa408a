package kinesis_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/brokertest"
)

// TestKPLNoSuchSubPosition: a start after a sub-position its record does
// not have — of a plain record (which would be skipped: the whole record
// orders after each of its sub-positions), past an aggregate's last user
// record, of a corrupt aggregate (read as one message at its sequence
// number) — fails the first fetch with brokers.ErrPositionUnknown naming
// the position, and every fetch after it, rather than read on past what
// the position should have led to.
func TestKPLNoSuchSubPosition(t *testing.T) {
	f := newHarness(t).newFixture(t, 1)
	s := f.open(t, f.config())
	shard := singleShard(t, s)
	k := putKPL(t, f, shard)
	ctx := brokertest.Context(t, 30*time.Second)
	for _, after := range []string{
		brokers.SubPosition(k.seqs[0], 0), // plain
		brokers.SubPosition(k.seqs[2], 3), // plain
		brokers.SubPosition(k.seqs[1], 7), // A1 holds 7
		brokers.SubPosition(k.seqs[5], 0), // corrupt
	} {
		r := open(t, s, shard, brokers.Start{After: after})
		for range 2 {
			res, err := r.Fetch(ctx, 10, time.Second)
			if !errors.Is(err, brokers.ErrPositionUnknown) || !strings.Contains(err.Error(), "position "+after+" ") {
				t.Errorf("fetch after %s = %d messages, %v; want ErrPositionUnknown naming it", after, len(res.Messages), err)
			}
		}
	}
}
