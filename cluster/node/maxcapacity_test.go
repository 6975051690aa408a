package node

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/actors/placement"
)

// Members gossiping different cluster.max_capacity values are logged once
// per change of that set, at most once per mixedCapWarnEvery, not at every
// view change.
func TestMixedMaxCapacityWarnedOncePerChange(t *testing.T) {
	var buf bytes.Buffer
	w := mixedCapWarner{log: slog.New(slog.NewTextHandler(&buf, nil)), own: 8}
	m := func(name string, maxCapacity float64) placement.Member {
		return placement.Member{Name: name, Capacity: 1, MaxCapacity: maxCapacity, State: placement.StateAlive}
	}
	agree := []placement.Member{m("a", 8), m("b", 8)}
	mixed := []placement.Member{m("a", 8), m("b", 8), m("c", 4)}
	mixed2 := []placement.Member{m("a", 8), m("b", 2), m("c", 4)}
	lines := func() []string {
		s := strings.TrimSpace(buf.String())
		buf.Reset()
		if s == "" {
			return nil
		}
		return strings.Split(s, "\n")
	}
	t0 := time.Unix(1000, 0)
	w.observe(agree, t0)
	if l := lines(); l != nil {
		t.Fatalf("agreeing members logged %q", l)
	}
	w.observe(mixed, t0.Add(time.Second))
	w.observe(mixed, t0.Add(2*time.Second)) // the same mismatch again: no log
	l := lines()
	if len(l) != 1 || !strings.Contains(l[0], "level=WARN") || !strings.Contains(l[0], `members="a=8 b=8 c=4"`) || !strings.Contains(l[0], "effective_max_capacity=4") {
		t.Fatalf("first mismatch logged %q, want one WARN naming a=8 b=8 c=4 and the clamp 4", l)
	}
	// Another mismatch within mixedCapWarnEvery waits for a later view change.
	w.observe(mixed2, t0.Add(3*time.Second))
	if l := lines(); l != nil {
		t.Fatalf("a change %v after the last log was logged: %q", 2*time.Second, l)
	}
	w.observe(mixed2, t0.Add(time.Second+mixedCapWarnEvery))
	if l := lines(); len(l) != 1 || !strings.Contains(l[0], `members="a=8 b=2 c=4"`) || !strings.Contains(l[0], "effective_max_capacity=2") {
		t.Fatalf("the second mismatch logged %q, want one WARN naming a=8 b=2 c=4 and the clamp 2", l)
	}
	w.observe(agree, t0.Add(time.Second+2*mixedCapWarnEvery))
	if l := lines(); len(l) != 1 || !strings.Contains(l[0], "level=INFO") || !strings.Contains(l[0], "max_capacity=8") {
		t.Fatalf("agreement again logged %q, want one INFO with 8", l)
	}
}
