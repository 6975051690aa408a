package actors

import (
	"strings"
	"testing"
)

// A unit paused, then sought (the seek runs while paused),
// then resumed while the seek's job is in flight, fetched on the reader
// the seek closed (u.conn nil) and panicked: it waits for the seek now.
func TestResumeDuringASeekStartedPaused(t *testing.T) {
	w := &unitWorld{t: t, now: scriptEpoch}
	defer w.close()
	var all strings.Builder
	for _, cmd := range []string{"start", "complete acquire", "complete open", "produce 2", "pause",
		"complete fetch", "complete apply", "seek earliest", "resume", "complete seek"} {
		got, err := w.do(cmd)
		all.WriteString(cmd + "\n" + got + "\n")
		if err != nil {
			t.Fatalf("%s: %v\n%s", cmd, err, all.String())
		}
	}
	if s := all.String(); strings.Contains(s, "unit failed") {
		t.Fatalf("the unit crashed:\n%s", s)
	}
}
