package exec

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestGoroutinesDeliversAndWaits(t *testing.T) {
	var g Goroutines
	got := make(chan any, 2)
	g.Go(context.Background(), func(context.Context) any { return 1 }, func(v any) { got <- v })
	cancel := g.Go(context.Background(), func(ctx context.Context) any {
		<-ctx.Done()
		return ctx.Err()
	}, func(v any) { got <- v })
	cancel()
	g.Wait()
	close(got)
	var vals []any
	for v := range got {
		vals = append(vals, v)
	}
	if len(vals) != 2 {
		t.Fatalf("delivered %v", vals)
	}
	// after Wait, jobs are dropped
	ran := false
	g.Go(context.Background(), func(context.Context) any { ran = true; return nil }, func(any) { ran = true })
	if ran {
		t.Fatal("a job ran after Wait")
	}
}

type rec struct{ d time.Duration }

func (r *rec) Pause(d time.Duration) { r.d += d }

func TestPauseUnderAPauserReturnsAtOnce(t *testing.T) {
	r := &rec{}
	ctx := WithPauser(context.Background(), r)
	if err := Wait(ctx, time.Hour, nil); err != nil {
		t.Fatal(err)
	}
	if r.d != time.Hour {
		t.Fatalf("recorded %s", r.d)
	}
}

func TestWaitOnTheWallClockWakesAndCancels(t *testing.T) {
	wake := make(chan struct{})
	close(wake)
	if err := Wait(context.Background(), time.Hour, wake); err != nil {
		t.Fatalf("woken wait: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Pause(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled pause: %v", err)
	}
	if err := Pause(context.Background(), time.Millisecond); err != nil {
		t.Fatal(err)
	}
}

func TestLabel(t *testing.T) {
	if Label(WithLabel(context.Background(), "fetch")) != "fetch" || Label(context.Background()) != "" {
		t.Fatal("label lost")
	}
}
