package nats

import (
	"errors"
	"testing"
	"time"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/brokertest"
)

// TestStreamPositionAt: against the embedded server, a time resolves to the
// sequence before the first message of the subject stored at or after it
// (other subjects' messages do not count), the beginning for the first,
// after the last sequence when none is that late; a reader opened there
// reads from that message.
func TestStreamPositionAt(t *testing.T) {
	e := newStreamEnv(t, "x", "y")
	ctx := brokertest.Context(t, 10*time.Second)
	x, y := e.subject("x"), e.subject("y")
	e.publish(t, x, "a", nil) // 1
	e.publish(t, y, "b", nil) // 2
	e.publish(t, x, "c", nil) // 3
	e.publish(t, x, "d", nil) // 4
	stamp := func(seq uint64) time.Time {
		m, err := e.st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		return m.Time
	}
	s := e.openStream(t, e.config())
	tests := []struct {
		part string
		at   time.Time
		want brokers.Start
	}{
		{x, stamp(1).Add(-time.Hour), brokers.Start{Mode: brokers.Earliest}},
		{x, stamp(1), brokers.Start{Mode: brokers.Earliest}},
		{x, stamp(2), brokers.Start{After: "2"}}, // y's message is not x's
		{x, stamp(3), brokers.Start{After: "2"}},
		{x, stamp(4), brokers.Start{After: "3"}},
		{y, stamp(2), brokers.Start{After: "1"}},
		{y, stamp(3), brokers.Start{After: "4"}}, // none that late: after the last
		{x, stamp(4).Add(time.Hour), brokers.Start{After: "4"}},
	}
	for i, tt := range tests {
		got, err := s.PositionAt(ctx, tt.part, tt.at)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if got != tt.want {
			t.Errorf("case %d: PositionAt(%s, %v) = %+v, want %+v", i, tt.part, tt.at, got, tt.want)
		}
	}
	st, err := s.PositionAt(ctx, x, stamp(3))
	if err != nil {
		t.Fatal(err)
	}
	r := openReader(t, s, x, st)
	if got, _ := fetchN(t, r, 2); vals(got) != "c,d" {
		t.Fatalf("read from the start resolved for the time of c: %s", vals(got))
	}
	if _, err := s.PositionAt(ctx, e.subject("z"), stamp(1)); !errors.Is(err, brokers.ErrUnknownPartition) {
		t.Fatalf("unknown subject: %v, want ErrUnknownPartition", err)
	}
}
