package kafka_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/brokertest"
)

// TestPositionAtByTimestamp: against kfake, ListOffsets by timestamp
// resolves a time to the offset before the first record stamped at or
// after it (the beginning for offset 0, after the newest when none is that
// late), and a reader opened at that start reads from that record.
func TestPositionAtByTimestamp(t *testing.T) {
	f := streamHarness{}.NewStream(t, 1).(*fixture)
	ctx := context.Background()
	t0 := time.UnixMilli(1700000000000)
	var recs []*kgo.Record
	for i := range 5 { // offsets 0..4 stamped t0, t0+1s, ..., t0+4s
		recs = append(recs, &kgo.Record{Topic: testTopic, Value: []byte{'a' + byte(i)}, Timestamp: t0.Add(time.Duration(i) * time.Second)})
	}
	if err := f.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	s := newTestStream(t, f.fc, "")
	tests := []struct {
		at   time.Time
		want brokers.Start
	}{
		{t0.Add(-time.Hour), brokers.Start{Mode: brokers.Earliest}},
		{t0, brokers.Start{Mode: brokers.Earliest}},
		{t0.Add(time.Second), brokers.Start{After: "0"}},
		{t0.Add(2500 * time.Millisecond), brokers.Start{After: "2"}},
		{t0.Add(4 * time.Second), brokers.Start{After: "3"}},
		{t0.Add(time.Hour), brokers.Start{After: "4"}},
	}
	for _, tt := range tests {
		got, err := s.PositionAt(brokertest.Context(t, 10*time.Second), "0", tt.at)
		if err != nil {
			t.Fatal(err)
		}
		if got != tt.want {
			t.Errorf("PositionAt(t0%+v) = %+v, want %+v", tt.at.Sub(t0), got, tt.want)
		}
	}
	st, err := s.PositionAt(brokertest.Context(t, 10*time.Second), "0", t0.Add(2500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Open(brokertest.Context(t, 10*time.Second), "0", st)
	if err != nil {
		t.Fatal(err)
	}
	var got []brokers.Message
	for len(got) < 2 {
		got = append(got, fetchOne(t, r).Messages...)
	}
	if string(got[0].Value) != "d" || got[0].Position != "3" || len(got) != 2 {
		t.Fatalf("read from the start resolved for t0+2.5s: first %s at %s, %d records", got[0].Value, got[0].Position, len(got))
	}
	if _, err := s.PositionAt(brokertest.Context(t, 10*time.Second), "7", t0); !errors.Is(err, brokers.ErrUnknownPartition) {
		t.Fatalf("unknown partition: %v, want ErrUnknownPartition", err)
	}
}
