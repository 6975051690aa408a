package actors

import (
	"fmt"
	"testing"

	"github.com/drover-dev/drover/persistence"
)

// control sets the node's view of the controls table to the unit paused
// or not (a node without a view gets one) and tells the unit.
func (w *unitWorld) control(paused bool) {
	if w.ne.controls == nil {
		w.ne.controls = &controlView{}
	}
	w.ne.controls.set([]persistence.Control{{Source: w.spec.Name, Unit: w.unitID, Paused: paused}})
	w.ne.root().Send(w.unit, &controlsChanged{all: true})
}

func TestControlView(t *testing.T) {
	var none *controlView
	if none.paused("s", "s/0") {
		t.Error("a node without a view paused a unit")
	}
	c := newControlView()
	if !c.paused("s", "s/0") {
		t.Error("a view not read yet lets units fetch")
	}
	if c.set(nil) == nil || c.paused("s", "s/0") {
		t.Error("an empty table read: not a change, or a unit still paused")
	}
	if c.set([]persistence.Control{{Source: "s", Unit: "s/1", Paused: false}}) != nil {
		t.Error("a row that pauses nothing changed the view")
	}
	if m := c.set([]persistence.Control{{Source: "s", Paused: true}, {Source: "t", Unit: "t/2", Paused: true}}); m == nil || !m.all {
		t.Error("pausing a source and a unit changed nothing")
	}
	for _, x := range []struct {
		source, unit string
		want         bool
	}{{"s", "s/0", true}, {"s", "s/9", true}, {"t", "t/2", true}, {"t", "t/1", false}, {"u", "u/0", false}} {
		if got := c.paused(x.source, x.unit); got != x.want {
			t.Errorf("paused(%s) = %v, want %v", x.unit, got, x.want)
		}
	}
	// a round's read that began before a newer view was set is dropped
	old := &controlsRead{gen: c.gen.Load()}
	c.set(nil)
	if c.applyRead(old) != nil || c.paused("s", "s/0") != false {
		t.Error("a stale read was applied over a newer view")
	}
	if c.applyRead(&controlsRead{gen: c.gen.Load(), rows: []persistence.Control{{Source: "s", Paused: true}}}) == nil || !c.paused("s", "s/0") {
		t.Error("a current read was not applied")
	}
}

// Issue 13 item 2 (review): a pending seek is told once per seek id, to
// its unit only; the same read again tells nothing; a row no longer
// pending is forgotten, a newer id told; retell has the next read tell it
// again; a seek this node carried out is not told.
func TestControlViewTellsSeekOnce(t *testing.T) {
	c := newControlView()
	c.set(nil)
	seek := func(unit string, id, done int64) persistence.Control {
		return persistence.Control{Source: "s", Unit: unit, Seek: "earliest", SeekID: id, SeekDoneID: done}
	}
	tells := func(what string, rows []persistence.Control, want ...string) {
		t.Helper()
		m := c.set(rows)
		var got []string
		if m != nil {
			if m.all {
				t.Fatalf("%s: told every unit (%+v), want only the seeks' units", what, m)
			}
			got = m.seeks
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: told %v, want %v", what, got, want)
		}
	}
	tells("a first read", []persistence.Control{seek("s/1", 1, 0), seek("s/0", 3, 2)}, "s/0", "s/1")
	for i := range 3 {
		tells(fmt.Sprintf("read %d with the same seeks pending", i+2), []persistence.Control{seek("s/1", 1, 0), seek("s/0", 3, 2)})
	}
	tells("s/1 done, s/0 pending", []persistence.Control{seek("s/1", 1, 1), seek("s/0", 3, 2)})
	if _, ok := c.told["s/1"]; ok {
		t.Error("a seek done is still remembered as told")
	}
	tells("a newer seek of s/1", []persistence.Control{seek("s/1", 2, 1), seek("s/0", 3, 2)}, "s/1")
	c.retell("s/0")
	tells("after retell of s/0", []persistence.Control{seek("s/1", 2, 1), seek("s/0", 3, 2)}, "s/0")
	c.seekMarked("s/2", 5)
	tells("a seek this node carried out, in a stale read", []persistence.Control{seek("s/1", 2, 1), seek("s/0", 3, 2), seek("s/2", 5, 4)})
}
