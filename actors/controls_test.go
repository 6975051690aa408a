package actors

import (
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
	w.ne.root().Send(w.unit, &controlsChanged{})
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
	if !c.set(nil) || c.paused("s", "s/0") {
		t.Error("an empty table read: not a change, or a unit still paused")
	}
	if c.set([]persistence.Control{{Source: "s", Unit: "s/1", Paused: false}}) {
		t.Error("a row that pauses nothing changed the view")
	}
	if !c.set([]persistence.Control{{Source: "s", Paused: true}, {Source: "t", Unit: "t/2", Paused: true}}) {
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
	if c.applyRead(old) || c.paused("s", "s/0") != false {
		t.Error("a stale read was applied over a newer view")
	}
	if c.applyRead(&controlsRead{gen: c.gen.Load(), rows: []persistence.Control{{Source: "s", Paused: true}}}) != true || !c.paused("s", "s/0") {
		t.Error("a current read was not applied")
	}
}
