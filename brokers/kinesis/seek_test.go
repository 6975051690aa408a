package kinesis_test

import (
	"errors"
	"testing"
	"time"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/brokertest"
)

// TestSeekTargets: against the emulator, the checkpoints a seek writes on
// a shard (brokers.SeekStart: Kinesis has no Seeker, a time is the "@at:"
// marker its Open resolves with AT_TIMESTAMP) read from the right record
// (a seek to a sequence number itself is refused: numbers are not
// consecutive, the one before is unknown):
// after:<seq> from the record after seq, a time from the first record
// that arrived at or after it.
func TestSeekTargets(t *testing.T) {
	ctx := brokertest.Context(t, 60*time.Second)
	f, s, shard := oneShard(t, ctx)
	all := values("s", 0, 5)
	if _, err := f.Produce(ctx, shard, all...); err != nil {
		t.Fatal(err)
	}
	read := fetchN(t, open(t, s, shard, brokers.Start{Mode: brokers.Earliest}), len(all))
	seekRead := func(to string, want []brokers.Message) {
		t.Helper()
		target, err := brokers.ParseSeekTarget(to)
		if err != nil {
			t.Fatal(err)
		}
		st, err := brokers.SeekStart(ctx, s, shard, target)
		if err != nil {
			t.Fatalf("seek %s: %v", to, err)
		}
		cp := brokers.StartPosition(st)
		back, ok := brokers.ParseStart(cp)
		if !ok {
			t.Fatalf("seek %s: checkpoint %q does not parse", to, cp)
		}
		got := fetchN(t, open(t, s, shard, back), len(want))
		if string(got[0].Value) != string(want[0].Value) {
			t.Fatalf("seek %s (checkpoint %s): first read %s, want %s", to, cp, got[0].Value, want[0].Value)
		}
	}
	seekRead("after:"+read[1].Position, all[2:])
	if _, err := brokers.SeekStart(ctx, s, shard, brokers.SeekTarget{From: read[2].Position}); !errors.Is(err, brokers.ErrBadSeek) {
		t.Fatalf("seek to a sequence number itself: %v, want ErrBadSeek (numbers are not consecutive)", err)
	}
	seekRead("after:"+read[2].Position, all[3:])
	seekRead(read[0].Time.Add(-time.Hour).UTC().Format(time.RFC3339Nano), all)
	seekRead("earliest", all)
}
