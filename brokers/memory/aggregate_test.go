package memory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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

// A reader opened after a sub-position its record does not have — of a
// plain record (which would be skipped: the whole record orders after
// each of its sub-positions), or past an aggregate's last user record
// (the rest of which would be skipped) — fails its first fetch with
// brokers.ErrPositionUnknown and keeps failing, rather than read on.
func TestAggregateNoSuchSubPosition(t *testing.T) {
	s, _ := newTestStream(t, 1)
	ctx := context.Background()
	m := func(v string) brokers.Message { return brokers.Message{Value: []byte(v)} }
	if _, err := s.Produce("0", m("p0")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ProduceAggregate("0", m("a0"), m("a1")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Produce("0", m("p2")); err != nil {
		t.Fatal(err)
	}
	for _, after := range []string{"0/0", "0/2", "1/2", "1/7", "2/0"} {
		r, err := s.OpenReader(ctx, "0", brokers.Start{After: after})
		if err != nil {
			t.Fatalf("open after %s: %v", after, err)
		}
		for range 2 {
			res, err := r.Fetch(ctx, 10, 0)
			if !errors.Is(err, brokers.ErrPositionUnknown) || !strings.Contains(err.Error(), "position "+after+" ") {
				t.Errorf("fetch after %s = %d messages, %v; want ErrPositionUnknown naming %s", after, len(res.Messages), err, after)
			}
		}
		_ = r.Close()
	}
	// the last user record of an aggregate is one: read on after it
	r, err := s.OpenReader(ctx, "0", brokers.Start{After: "1/1"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if res, err := r.Fetch(ctx, 10, 0); err != nil || len(res.Messages) != 1 || res.Messages[0].Position != "2" {
		t.Errorf("fetch after 1/1 = %v, %v; want the record at 2", res.Messages, err)
	}
}
