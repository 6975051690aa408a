package lifetime

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/drover-dev/drover/brokers"
)

func TestShutOnce(t *testing.T) {
	var mu sync.Mutex
	closed := false
	if !Shut(&mu, &closed) || !closed {
		t.Fatalf("first Shut: closed = %v", closed)
	}
	if Shut(&mu, &closed) {
		t.Fatal("second Shut reported that it closed")
	}
}

func TestShutAllTakesTheChildrenOnce(t *testing.T) {
	var mu sync.Mutex
	closed := false
	set := map[int]struct{}{1: {}, 2: {}}
	got, first := ShutAll(&mu, &closed, set)
	if !first || len(got) != 2 || len(set) != 0 || !closed {
		t.Fatalf("first ShutAll = %v, %v; set %v", got, first, set)
	}
	set[3] = struct{}{}
	if got, first := ShutAll(&mu, &closed, set); first || got != nil || len(set) != 1 {
		t.Fatalf("second ShutAll = %v, %v; set %v", got, first, set)
	}
}

func TestLeave(t *testing.T) {
	var mu sync.Mutex
	set := map[int]struct{}{1: {}, 2: {}}
	Leave(&mu, set, 1)
	Leave(&mu, set, 1)
	if _, ok := set[1]; ok || len(set) != 1 {
		t.Fatalf("set after Leave(1) twice: %v", set)
	}
}

func TestAdd(t *testing.T) {
	var mu sync.Mutex
	closed := false
	one := 1
	mk := func() *int { return &one }
	if p, err := Add(context.Background(), &mu, &closed, "open", mk); err != nil || p != &one {
		t.Fatalf("open parent: %v, %v", p, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if p, err := Add(ctx, &mu, &closed, "open", mk); !errors.Is(err, context.Canceled) || p != nil {
		t.Fatalf("ended ctx: %v, %v", p, err)
	}
	closed = true
	var be *brokers.Error
	if p, err := Add(context.Background(), &mu, &closed, "open", mk); !errors.As(err, &be) || be.Op != "open" || !errors.Is(err, brokers.ErrClosed) || p != nil {
		t.Fatalf("closed parent: %v, %v", p, err)
	}
}

func TestCheck(t *testing.T) {
	l := New(context.Background(), nil)
	if err := l.Check(context.Background(), "fetch"); err != nil {
		t.Fatalf("open lifetime, live ctx: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.Check(ctx, "fetch"); !errors.Is(err, context.Canceled) {
		t.Fatalf("open lifetime, ended ctx: %v", err)
	}
	l.Close()
	var be *brokers.Error
	if err := l.Check(ctx, "fetch"); !errors.As(err, &be) || be.Op != "fetch" || !errors.Is(err, brokers.ErrClosed) {
		t.Fatalf("closed lifetime (ctx ended too): %v, want ErrClosed first", err)
	}
}
