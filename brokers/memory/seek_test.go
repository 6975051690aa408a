package memory

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/drover-dev/drover/brokers"
)

// TestPositionAt: a time resolves to the start just before the first
// message stamped at or after it, and reading from that start returns
// exactly what Open at the time returns.
func TestPositionAt(t *testing.T) {
	ctx := context.Background()
	s, c := newTestStream(t, 1)
	t0 := c.Now()
	for i := range 4 { // offsets 0..3 stamped t0, t0+1s, t0+2s, t0+3s
		if _, err := s.Produce("0", brokers.Message{Time: t0.Add(time.Duration(i) * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		at   time.Time
		want brokers.Start
	}{
		{t0.Add(-time.Hour), brokers.Start{Mode: brokers.Earliest}},
		{t0, brokers.Start{Mode: brokers.Earliest}},
		{t0.Add(time.Second), brokers.Start{After: "0"}},
		{t0.Add(1500 * time.Millisecond), brokers.Start{After: "1"}},
		{t0.Add(3 * time.Second), brokers.Start{After: "2"}},
		{t0.Add(time.Hour), brokers.Start{After: "3"}},
	}
	for _, tt := range tests {
		got, err := s.PositionAt(ctx, "0", tt.at)
		if err != nil {
			t.Fatal(err)
		}
		if got != tt.want {
			t.Errorf("PositionAt(t0%+v) = %+v, want %+v", tt.at.Sub(t0), got, tt.want)
		}
	}
	if _, err := s.PositionAt(ctx, "9", t0); !errors.Is(err, brokers.ErrUnknownPartition) {
		t.Fatalf("unknown partition: %v", err)
	}
	if err := s.Trim("0", "2"); err != nil { // offsets 0 and 1
		t.Fatal(err)
	}
	if _, err := s.PositionAt(ctx, "0", t0.Add(time.Second)); !errors.Is(err, brokers.ErrPositionGone) {
		t.Fatalf("a trimmed message is that late: %v, want ErrPositionGone", err)
	}
	if got, err := s.PositionAt(ctx, "0", t0.Add(2*time.Second)); err != nil || got != (brokers.Start{After: "1"}) {
		t.Fatalf("after the trimmed ones: %+v, %v", got, err)
	}
}
