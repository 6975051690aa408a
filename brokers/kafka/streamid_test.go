package kafka_test

import (
	"testing"
	"time"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/brokertest"
)

// A topic deleted and created again while no reader ran, then refilled
// past the checkpoint: its offsets alone cannot tell it from the old one,
// its topic ID can. A start recorded against the old ID is refused as
// ErrPositionUnknown (so on_position_reset applies); one recorded against
// the new ID, or against none, opens.
func TestOpenRefusesAPositionOfAnEarlierTopic(t *testing.T) {
	fc := startCluster(t, 1)
	p := newProducers(t, fc)
	produceValues(t, p.plain, "old-0", "old-1", "old-2", "old-3", "old-4")
	s := newTestStream(t, fc, "")
	ctx := brokertest.Context(t, 30*time.Second)
	old, err := s.StreamID(ctx, "0")
	if err != nil || old == "" {
		t.Fatalf("stream id: %q, %v", old, err)
	}
	recreate(t, fc)
	p = newProducers(t, fc)
	produceValues(t, p.plain, "new-0", "new-1", "new-2", "new-3", "new-4", "new-5", "new-6")
	s = newTestStream(t, fc, "")
	now, err := s.StreamID(ctx, "0")
	if err != nil || now == "" || now == old {
		t.Fatalf("stream id after the recreation: %q (was %q), %v", now, old, err)
	}
	_, err = s.Open(ctx, "0", brokers.Start{After: "4", StreamID: old})
	wantUnknown(t, err, "partition 0", "deleted and created again", old, now)
	for _, id := range []string{now, ""} {
		r, err := s.Open(ctx, "0", brokers.Start{After: "4", StreamID: id})
		if err != nil {
			t.Fatalf("open after 4 recorded against %q: %v", id, err)
		}
		if got, _ := readAll(t, r, 2, 10); valuesOf(got)[0] != "new-5" {
			t.Fatalf("read %v, want new-5 first", valuesOf(got))
		}
		_ = r.Close()
	}
}

// A broker without topic IDs has no stream id: starts open as before.
func TestNoStreamIDBeforeKafka28(t *testing.T) {
	fc := startCluster(t, 1, kafkaBefore28())
	p := newProducers(t, fc)
	produceValues(t, p.plain, "a", "b")
	s := newTestStream(t, fc, "")
	ctx := brokertest.Context(t, 30*time.Second)
	if id, err := s.StreamID(ctx, "0"); err != nil || id != "" {
		t.Fatalf("stream id on Kafka 2.7: %q, %v; want none", id, err)
	}
	r, err := s.Open(ctx, "0", brokers.Start{After: "0", StreamID: "0123"})
	if err != nil {
		t.Fatalf("open with a recorded id on a broker without ids: %v", err)
	}
	_ = r.Close()
}
