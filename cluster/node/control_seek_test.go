package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/memory"
	"github.com/drover-dev/drover/cluster/config"
	"github.com/drover-dev/drover/cluster/debug"
	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/persistence/stores"
)

// seekUnitOf returns the tree entry of unit.
func seekUnitOf(n *Node, unit string) (actors.UnitStatus, bool) {
	for _, s := range n.Tree().Sources {
		for _, u := range s.Units {
			if u.Unit == unit {
				return u, true
			}
		}
	}
	return actors.UnitStatus{}, false
}

// waitUnit waits up to 20 s for unit's tree entry to satisfy cond.
func waitUnit(t *testing.T, n *Node, unit string, what string, cond func(actors.UnitStatus) bool) actors.UnitStatus {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		u, ok := seekUnitOf(n, unit)
		if ok && cond(u) {
			return u
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 20 s (tree entry %+v)", unit, u)
		}
		<-tick.C
	}
}

// TestControlSeek: POST /debug/control/seek's action on a node. A seek of
// a unit this node owns is carried out by its actor under its lease
// (checkpoint moved back, exactly the messages after it applied again,
// last_seek in the tree, the record for the controls table returned); a
// unit held by another node is a conflict naming that node; a queue, an
// unknown source or partition and a bad target are bad requests.
func TestControlSeek(t *testing.T) {
	dir := t.TempDir()
	storeURL := "sqlite:" + dir + "/d.db"
	ms, err := memory.NewStream(memory.StreamConfig{Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	mq, err := memory.NewQueue(memory.QueueConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	// m/1 is held by a node n2 that renews it: n1 cannot take it over
	st, err := stores.Open(ctx, storeURL, stores.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	held, err := st.Acquire(ctx, persistence.AcquireRequest{Unit: "m/1", Owner: "n2", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	yaml := fmt.Sprintf(`node: {name: n1, debug_addr: "127.0.0.1:0"}
cluster: {bind: "127.0.0.1:0"}
store: {url: %q}
sources:
  - {name: m, type: memory, memory: {partitions: 2}, records: {key: id}}
  - {name: q, type: memory, memory: {queue: true}, records: {key: id}}
`, storeURL)
	n, err := Start(ctx, parseConfig(t, yaml, config.Options{}), Options{
		OpenSource: func(_ context.Context, s config.Source, _ *slog.Logger) (Source, error) {
			if s.Name == "q" {
				return Source{Queue: mq}, nil
			}
			return Source{Stream: ms}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	for i := range 50 {
		if _, err := ms.Produce("0", brokers.Message{Value: fmt.Appendf(nil, `{"id":"k%d"}`, i)}); err != nil {
			t.Fatal(err)
		}
	}
	waitUnit(t, n, "m/0", "applied 50", func(u actors.UnitStatus) bool { return u.Applied == 50 && u.Position == "49" })

	rep, err := n.Control(ctx, debugSeek("m", "m/0", "after:39"))
	if err != nil {
		t.Fatal(err)
	}
	rec, ok := rep.Result.(SeekRecord)
	if !ok || rec.From != "49" || rec.Position != "39" || rec.Node != "n1" || rec.By != "tester" || rec.Token == 0 {
		t.Fatalf("seek reply %+v", rep)
	}
	if cp, err := st.Checkpoint(ctx, "m/0"); err != nil || brokers.ComparePositions(cp.Position, "49") > 0 {
		t.Fatalf("checkpoint %+v, %v after the seek", cp, err)
	}
	u := waitUnit(t, n, "m/0", "re-applied 10", func(u actors.UnitStatus) bool { return u.Applied >= 60 && u.Position == "49" })
	if u.Applied != 60 {
		t.Fatalf("applied %d after a seek back 10, want exactly 60", u.Applied)
	}
	if ls := u.LastSeek; ls == nil || ls.To != "after:39" || ls.Position != "39" || ls.From != "49" || ls.By != "tester" || ls.Reason != "test" {
		t.Fatalf("last_seek %+v", u.LastSeek)
	}
	// recorded in the audit table, with who, why and what moved
	// (asked, then carried out), and its control row marked done
	if es, err := st.ListAudit(ctx, persistence.AuditFilter{Unit: "m/0"}); err != nil || len(es) != 2 ||
		es[0].Args != "to=after:39" || es[1].Action != "seek" || es[1].By != "tester" || es[1].Reason != "test" || es[1].Source != "m" ||
		!strings.Contains(es[1].Args, "id=1 to=after:39 from=49 position=39") {
		t.Fatalf("audit of the seek: %+v, %v", es, err)
	}
	if row := controlOf(t, st, "m/0"); row.SeekID != 1 || row.SeekDoneID != 1 || row.Seek != "after:39" {
		t.Fatalf("control row after the seek: %+v", row)
	}

	// held elsewhere: a conflict naming the holder
	if _, _, err := st.RenewLeases(ctx, "n2", []persistence.Lease{held}, time.Hour); err != nil {
		t.Fatal(err)
	}
	// held elsewhere: asked through the control row, for n2 to carry out
	rep, err = n.Control(ctx, debugSeek("m", "m/1", "earliest"))
	if err != nil || rep.Node != "n2" || !strings.Contains(rep.Detail, "the owner n2 carries it out within a renewal round") {
		t.Fatalf("seek of a unit n2 holds: %+v, %v", rep, err)
	}
	if row := controlOf(t, st, "m/1"); row.SeekID != 1 || row.SeekDoneID != 0 || row.Seek != "earliest" {
		t.Fatalf("control row of a seek asked of n2: %+v", row)
	}
	// a sub-position on a stream without them is refused here, at once,
	// not written for the owner to refuse later (the node's view of m
	// made a stream without sub-positions, as a Kafka source is)
	n.mu.Lock()
	was := n.sources["m"]
	n.sources["m"] = Source{Stream: plainStream{was.Stream}}
	n.mu.Unlock()
	_, err = n.Control(ctx, debugSeek("m", "m/1", "5/2"))
	n.mu.Lock()
	n.sources["m"] = was
	n.mu.Unlock()
	if !errors.Is(err, debugErrBad) || !strings.Contains(err.Error(), "5/2 is a sub-position") {
		t.Fatalf("seek to a sub-position on a stream without them: %v, want a bad request naming 5/2", err)
	}
	if row := controlOf(t, st, "m/1"); row.SeekID != 1 || row.Seek != "earliest" {
		t.Fatalf("a refused sub-position seek wrote the control row: %+v", row)
	}
	for _, tt := range []struct{ src, unit, to, says string }{
		{"q", "q/slot-0", "earliest", "queue"},
		{"nope", "nope/0", "earliest", `no source "nope"`},
		{"m", "m/7", "earliest", `no partition "7"`},
		{"m", "m/0", "tomorrow", "RFC 3339"},
		{"m", "", "earliest", "one unit"},
		{"m", "m/0", "after:900", "its end is 50"},
	} {
		_, err := n.Control(ctx, debugSeek(tt.src, tt.unit, tt.to))
		if !errors.Is(err, debugErrBad) || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("seek %s %s to %s: %v, want a bad request saying %q", tt.src, tt.unit, tt.to, err, tt.says)
		}
	}
	// the seek the broker refused (after:900) was asked through the row:
	// marked done, so that it is not tried again, its error in the tree
	if row := controlOf(t, st, "m/0"); row.SeekID != 2 || row.SeekDoneID != 2 || row.Seek != "after:900" {
		t.Fatalf("control row after a refused seek: %+v", row)
	}
	if u, _ := seekUnitOf(n, "m/0"); u.LastSeek == nil || u.LastSeek.ID != 2 || !strings.Contains(u.LastSeek.Error, "its end is 50") {
		t.Fatalf("last_seek after a refused seek: %+v", u.LastSeek)
	}
}

var debugErrBad = debug.ErrBadControl

// plainStream is a stream that hides its sub-positions (brokers.SubPositioner).
type plainStream struct{ brokers.Stream }

// controlOf is unit's control row (the zero row when it has none).
func controlOf(t *testing.T, st persistence.Store, unit string) persistence.Control {
	t.Helper()
	cs, err := st.ListControls(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if c.Unit == unit {
			return c
		}
	}
	return persistence.Control{}
}

func debugSeek(src, unit, to string) debug.ControlRequest {
	return debug.ControlRequest{Action: debug.ActionSeek, Source: src, Unit: unit, To: to, By: "tester", Reason: "test"}
}
