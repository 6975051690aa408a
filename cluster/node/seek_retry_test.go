package node

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/memory"
	"github.com/drover-dev/drover/cluster/config"
)

// failingOpen is a memory stream whose next Open fails with a transient
// (not position-invalid) error when armed.
type failingOpen struct {
	*memory.Stream
	armed atomic.Bool
}

func (f *failingOpen) Open(ctx context.Context, part string, st brokers.Start) (brokers.Reader, error) {
	if f.armed.CompareAndSwap(true, false) {
		return nil, fmt.Errorf("broker unavailable (transient)")
	}
	return f.Stream.Open(ctx, part, st)
}

// A seek asked of the owner whose first try fails with a transient error
// is not reported failed (it was, while its control row stayed pending and
// the owner's pickup carried it out later anyway, so an operator who asked
// again had the range applied twice): the reply says it is asked and the
// first try failed, and the owner carries it out once.
func TestFailedFirstTryOfASeekIsCarriedOutOnce(t *testing.T) {
	dir := t.TempDir()
	storeURL := "sqlite:" + dir + "/d.db"
	ms, err := memory.NewStream(memory.StreamConfig{Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	fs := &failingOpen{Stream: ms}
	ctx := t.Context()
	yaml := fmt.Sprintf(`node: {name: n1, debug_addr: "127.0.0.1:0"}
cluster: {bind: "127.0.0.1:0"}
store: {url: %q}
sources:
  - {name: m, type: memory, lease_ttl: 3s, memory: {partitions: 1}, records: {key: id}}
`, storeURL)
	n, err := Start(ctx, parseConfig(t, yaml, config.Options{}), Options{
		OpenSource: func(_ context.Context, s config.Source, _ *slog.Logger) (Source, error) {
			return Source{Stream: fs}, nil
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
	fs.armed.Store(true)
	rep, err := n.Control(ctx, debugSeek("m", "m/0", "after:39"))
	if err != nil || !strings.Contains(rep.Detail, "asked") || !strings.Contains(rep.Detail, "first try failed") {
		t.Fatalf("seek whose first try fails: %+v, %v; want it asked, saying the first try failed", rep, err)
	}
	u := waitUnit(t, n, "m/0", "the seek carried out", func(u actors.UnitStatus) bool {
		return u.LastSeek != nil && u.LastSeek.ID == 1 && u.Applied >= 60 && u.Position == "49"
	})
	if u.Applied != 60 {
		t.Fatalf("applied %d after the seek back 10, want exactly 60", u.Applied)
	}
	if !n.seekDone(ctx, "m/0", 1) {
		t.Fatal("the seek carried out is not marked done: it would run again")
	}
}
