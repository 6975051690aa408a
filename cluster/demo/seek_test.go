package demo

import (
	"context"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/drover-dev/drover/actors"
)

// Issue 13's acceptance for seek, across processes: with the unit paused
// (so that its checkpoint holds still), `drover seek --after <checkpoint -
// 100>` sent to its owner moves the checkpoint back by exactly 100
// positions, by the owner under its lease; resumed, the unit reads
// exactly those 100 again and then what was produced meanwhile — its
// received count grows by exactly that — and at the end the records table
// is what the messages make it (docs re-applied in order end as they
// were) while the audit source, which nobody sought, holds every message
// exactly once.
func TestSeekBackReappliesExactlyAcrossProcesses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := startConverged(t, ctx, Config{Partitions: 4})
	defer c.Close()
	_, stopProducing := producing(t, ctx, c, 17)

	const unit = "orders/1"
	where := func() (string, actors.UnitStatus) {
		tr, err := c.Tree(ctx)
		if err != nil {
			return "", actors.UnitStatus{}
		}
		for _, nt := range tr.Nodes {
			for _, s := range nt.Sources {
				for _, u := range s.Units {
					if u.Unit == unit && u.LeaseToken != 0 && (u.State == actors.StateRunning || u.State == actors.StatePaused) {
						return nt.Node, u
					}
				}
			}
		}
		return "", actors.UnitStatus{}
	}
	drover := func(via *Node, args ...string) string {
		t.Helper()
		out, err := exec.CommandContext(ctx, binary, append(args, "--addr", via.DebugAddr, "--by", "test", "--reason", "acceptance")...).CombinedOutput()
		if err != nil {
			t.Fatalf("drover %v via %s: %v\n%s", args, via.Name, err, out)
		}
		return string(out)
	}
	waitFor(t, ctx, unit+" past 150", func() bool {
		_, u := where()
		p, err := strconv.ParseInt(u.Position, 10, 64)
		return err == nil && p > 150
	})
	owner, _ := where()
	on, err := c.Node(owner)
	if err != nil {
		t.Fatal(err)
	}
	drover(on, "pause", unit)
	waitFor(t, ctx, unit+" paused", func() bool { n, u := where(); return n == owner && u.State == actors.StatePaused })
	_, u := where()
	pos, _ := strconv.ParseInt(u.Position, 10, 64)
	back := strconv.FormatInt(pos-100, 10)
	sent := stopProducing()

	// --after P: the checkpoint becomes P, so P+1 .. pos (100 messages)
	// are read again (--to P would read P again too)
	t.Logf("drover seek: %s", drover(on, "seek", unit, "--after", back))
	waitFor(t, ctx, unit+" sought back to "+back, func() bool { _, u := where(); return u.Position == back })
	_, u = where()
	if u.LastSeek == nil || u.LastSeek.Position != back || u.LastSeek.From != strconv.FormatInt(pos, 10) || u.LastSeek.By != "test" {
		t.Fatalf("last_seek %+v, want %s -> %s by test", u.LastSeek, u.Position, back)
	}
	// received counts every message fetched (applied counts ops after a
	// batch's fold and dead letters apart, which depends on batching)
	received := u.Received
	last := sent.Kafka[1][len(sent.Kafka[1])-1].Offset
	drover(on, "resume", unit)
	end := strconv.FormatInt(last, 10)
	waitFor(t, ctx, unit+" at its end "+end, func() bool { _, u := where(); return u.Position == end })
	if n, u := where(); n != owner || u.Received-received != last-(pos-100) {
		t.Errorf("%s on %s read %d messages after the resume, want exactly %d: the 100 sought back and the %d produced after %d", unit, n, u.Received-received, last-(pos-100), last-pos, pos)
	}
	if v := drainAndVerify(t, ctx, c, sent); !v.OK() || v.Produced == 0 {
		t.Errorf("%s\n%v", v.Line(), v.Problems)
	}
}
