package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/drover-dev/drover/cluster/debug"
)

// slowReloader's reloads block until released.
type slowReloader struct {
	started chan struct{}
	release chan struct{}
}

func (s *slowReloader) ExitRequested() <-chan struct{} { return nil }

func (s *slowReloader) Control(context.Context, debug.ControlRequest) (debug.ControlReply, error) {
	s.started <- struct{}{}
	<-s.release
	return debug.ControlReply{}, nil
}

// A SIGTERM during a slow SIGHUP reload is acted on at once (the reload
// ran inline, so the signal waited for it: up to its 2-minute bound, past
// an orchestrator's grace period).
func TestStopSignalDuringAReloadIsActedOn(t *testing.T) {
	n := &slowReloader{started: make(chan struct{}, 4), release: make(chan struct{})}
	defer close(n.release)
	sigs, hups := make(chan os.Signal, 1), make(chan os.Signal, 4)
	returned := make(chan struct{})
	go func() {
		waitForStop(n, sigs, hups, slog.New(slog.NewTextHandler(io.Discard, nil)))
		close(returned)
	}()
	hups <- syscall.SIGHUP
	select {
	case <-n.started:
	case <-time.After(10 * time.Second):
		t.Fatal("SIGHUP started no reload")
	}
	hups <- syscall.SIGHUP // one more waits; a third is folded into it
	hups <- syscall.SIGHUP
	sigs <- syscall.SIGTERM
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("SIGTERM not acted on while a reload runs")
	}
}
