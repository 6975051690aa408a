package main

import (
	"bytes"
	"log/slog"
	"runtime/debug"
	"strings"
	"testing"
)

// TestGCTuningYieldsToTheEnvironment: a GOGC or GOMEMLIMIT in the
// environment keeps the adaptive tuner off (and says so), as does
// node.gc_tuning: off; adaptive without them starts it (what it sets and
// that stop restores the process's GOGC: internal/gctune's tests).
func TestGCTuningYieldsToTheEnvironment(t *testing.T) {
	for _, name := range []string{"GOGC", "GOMEMLIMIT"} {
		var buf bytes.Buffer
		log := slog.New(slog.NewTextHandler(&buf, nil))
		env := func(n string) (string, bool) { return "50", n == name }
		startGCTuning("adaptive", env, log)()
		if !strings.Contains(buf.String(), "gc tuning off: "+name+" is set") {
			t.Errorf("with %s set the log says %q", name, buf.String())
		}
	}
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	none := func(string) (string, bool) { return "", false }
	startGCTuning("off", none, log)()
	if buf.Len() != 0 {
		t.Errorf("gc_tuning off logged %q", buf.String())
	}
	was := debug.SetGCPercent(100)
	defer debug.SetGCPercent(was)
	stop := startGCTuning("adaptive", none, log)
	stop()
	if !strings.Contains(buf.String(), "gc tuning adaptive") {
		t.Errorf("adaptive logged %q", buf.String())
	}
}
