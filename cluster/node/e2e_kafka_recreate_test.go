package node_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/cluster/config"
	"github.com/drover-dev/drover/cluster/node"
	"github.com/drover-dev/drover/internal/testserver"
	"github.com/drover-dev/drover/persistence/sqlite"
)

// A Kafka topic deleted and created again while the node was down, and
// refilled past the unit's checkpoint before it came back: the offsets
// alone look like a position of the new topic, the topic ID recorded
// with the checkpoint does not. The unit resets (on_position_reset:
// earliest) and applies every message of the new topic; it used to read
// on after the old checkpoint and skip the first ones without a word.
func TestE2EKafkaTopicRecreatedPastTheCheckpoint(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "events"))
	if err != nil {
		testserver.SkipOrFail(t, "kfake did not start: "+err.Error())
	}
	t.Cleanup(c.Close)
	addr := c.ListenAddrs()[0]
	produce := func(prefix string, n int) {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("events"))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		var recs []*kgo.Record
		for i := range n {
			recs = append(recs, &kgo.Record{Value: fmt.Appendf(nil, `{"id":"%s-%d"}`, prefix, i)})
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	dir := t.TempDir()
	yaml := fmt.Sprintf(`node: {name: n1, debug_addr: "127.0.0.1:0"}
cluster: {bind: "127.0.0.1:0"}
store: {url: "sqlite:%s/d.db"}
sources:
  - name: orders
    type: kafka
    kafka: {brokers: [%q], topic: events}
    records: {key: id}
    on_position_reset: earliest
    max_wait: 100ms
`, dir, addr)
	runUntil := func(pos string) {
		t.Helper()
		cfg, err := config.Parse([]byte(yaml), config.Options{})
		if err != nil {
			t.Fatal(err)
		}
		n, err := node.Start(t.Context(), cfg, node.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = n.Shutdown(ctx)
		}()
		err = e2eWaitFor(t.Context(), 20*time.Millisecond, time.Minute, func() (bool, string) {
			u := unitIn(n.Tree(), "orders/0")
			if u == nil {
				return false, "no unit orders/0"
			}
			return u.Position == pos, fmt.Sprintf("orders/0 at %q (%s), want %s", u.Position, u.State, pos)
		})
		if err != nil {
			t.Fatal(err)
		}
	}

	produce("old", 20)
	runUntil("19")
	if err := c.DeleteTopic("events"); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateTopic("events", 1, nil); err != nil {
		t.Fatal(err)
	}
	produce("new", 30) // offsets 0..29, past the checkpoint 19
	runUntil("29")

	st, err := sqlite.Open(t.Context(), filepath.Join(dir, "d.db"), sqlite.Config{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	recs, err := st.Records(t.Context(), "orders", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, r := range recs {
		have[r.Key] = true
	}
	for i := range 30 {
		if k := fmt.Sprintf("new-%d", i); !have[k] {
			t.Errorf("%s of the recreated topic was never applied", k)
		}
	}
}

func unitIn(tr actors.Tree, unit string) *actors.UnitStatus {
	for _, s := range tr.Sources {
		for i := range s.Units {
			if s.Units[i].Unit == unit {
				return &s.Units[i]
			}
		}
	}
	return nil
}
