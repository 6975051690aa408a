package node_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/cluster/config"
	"github.com/drover-dev/drover/cluster/node"
	"github.com/drover-dev/drover/internal/testserver"
)

// A Kafka source is a brokers.Committer (the runtime records its position
// in the consumer group about once a second per unit) only when it has a
// commit_to_group: without one the adapter's Committed fails, and every
// unit logged a WARN "record position in the broker" every second. Either
// way the stream still resolves starts (brokers.Resolver).
func TestKafkaSourceCommitsOnlyWithAGroup(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "events"))
	if err != nil {
		testserver.SkipOrFail(t, "kfake did not start: "+err.Error())
	}
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, group := range []string{"", "drover-lag"} {
		yaml := `node: {name: n1}
sources:
  - name: orders
    type: kafka
    records: {table: orders, key: id}
    kafka:
      brokers: ["` + c.ListenAddrs()[0] + `"]
      topic: events
`
		if group != "" {
			yaml += "      commit_to_group: " + group + "\n"
		}
		cfg, err := config.Parse([]byte(yaml), config.Options{})
		if err != nil {
			t.Fatal(err)
		}
		src, err := node.OpenSource(ctx, cfg.Sources[0], slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatalf("open with commit_to_group %q: %v", group, err)
		}
		_, committer := src.Stream.(brokers.Committer)
		r, resolver := src.Stream.(brokers.Resolver)
		if committer != (group != "") {
			t.Errorf("commit_to_group %q: the stream is a Committer: %v, want %v", group, committer, group != "")
		}
		if !resolver {
			t.Errorf("commit_to_group %q: the stream is not a Resolver", group)
		} else if st, err := r.Resolve(ctx, "0", brokers.Earliest); err != nil {
			t.Errorf("commit_to_group %q: resolve the earliest start of partition 0: %v", group, err)
		} else {
			t.Logf("commit_to_group %q: partition 0 starts at %+v", group, st)
		}
		if parts, err := src.Stream.Partitions(ctx); err != nil || len(parts) != 1 {
			t.Errorf("commit_to_group %q: partitions %v, %v", group, parts, err)
		}
		if err := src.Stream.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}
}
