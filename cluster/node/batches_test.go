package node

import (
	"context"
	"io"
	"log/slog"
	"testing"

	brokermem "github.com/drover-dev/drover/brokers/memory"
	"github.com/drover-dev/drover/cluster/config"
)

// Issue 10 item 6: a source's batch_bytes and dead_letter_max_bytes reach
// the runtime.
func TestOpenSourcePassesBatchLimits(t *testing.T) {
	n := &Node{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	st, err := brokermem.NewStream(brokermem.StreamConfig{Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	open := func(context.Context, config.Source, *slog.Logger) (Source, error) { return Source{Stream: st}, nil }
	s := config.Source{Name: "s", Type: config.TypeMemory, Records: config.Records{Table: "s"}, BatchBytes: 3 << 20, DeadLetterMaxBytes: 4096}
	spec, _, err := n.openSource(context.Background(), 0, s, Options{OpenSource: open})
	if err != nil {
		t.Fatal(err)
	}
	if spec.BatchBytes != 3<<20 || spec.MaxDeadLetterBytes != 4096 {
		t.Errorf("spec batch bytes %d, max dead-letter bytes %d; want 3145728, 4096", spec.BatchBytes, spec.MaxDeadLetterBytes)
	}
}
