package memory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/drover-dev/drover/brokers"
)

// An aggregate (ProduceAggregate) is read as its user records at
// sub-positions, at most max per fetch, the ones left counted as lag; a
// reader opened after a sub-position resumes inside it, one opened after
// the aggregate's offset (its whole record) after it.
func TestAggregate(t *testing.T) {
	s, _ := newTestStream(t, 1)
	ctx := context.Background()
	m := func(v string) brokers.Message { return brokers.Message{Key: []byte("k-" + v), Value: []byte(v)} }
	if _, err := s.Produce("0", m("p0")); err != nil {
		t.Fatal(err)
	}
	pos, err := s.ProduceAggregate("0", m("a0"), m("a1"), m("a2"), m("a3"), m("a4"))
	if err != nil || !slices.Equal(pos, []string{"1/0", "1/1", "1/2", "1/3", "1/4"}) {
		t.Fatalf("ProduceAggregate = %v, %v", pos, err)
	}
	if _, err := s.Produce("0", m("p2")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ProduceAggregate("0"); err == nil {
		t.Fatal("an empty aggregate was produced")
	}
	read := func(after string, max int) (got []string, lags []int64) {
		t.Helper()
		start := brokers.Start{After: after}
		if after == "" {
			start = brokers.Start{Mode: brokers.Earliest}
		}
		r, err := s.OpenReader(ctx, "0", start)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		for {
			res, err := r.Fetch(ctx, max, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Messages) == 0 {
				return got, lags
			}
			if len(res.Messages) > max {
				t.Fatalf("fetch of %d returned %d", max, len(res.Messages))
			}
			for _, msg := range res.Messages {
				got = append(got, fmt.Sprintf("%s=%s", msg.Position, msg.Value))
			}
			lags = append(lags, res.Lag)
		}
	}
	all := []string{"0=p0", "1/0=a0", "1/1=a1", "1/2=a2", "1/3=a3", "1/4=a4", "2=p2"}
	got, lags := read("", 2)
	if !slices.Equal(got, all) || !slices.Equal(lags, []int64{5, 3, 1, 0}) {
		t.Errorf("read by 2 = %v, lags %v; want %v, lags [5 3 1 0]", got, lags, all)
	}
	for after, want := range map[string][]string{"1/1": all[3:], "1/4": all[6:], "1": all[6:], "0": all[1:], "2": nil} {
		if got, _ := read(after, 3); !slices.Equal(got, want) {
			t.Errorf("after %s = %v, want %v", after, got, want)
		}
	}
	if _, err := s.OpenReader(ctx, "0", brokers.Start{After: "3/0"}); !errors.Is(err, brokers.ErrPositionUnknown) {
		t.Errorf("after a sub-position beyond the end: %v, want ErrPositionUnknown", err)
	}
}
