package storetest

import (
	"fmt"
	"sync"
	"time"

	"github.com/drover-dev/drover/persistence"
)

// controls.go: persistence.Controls (issue 13 items 1 and 5).

func ptr[T any](v T) *T { return &v }

func (e *env) setControl(c persistence.ControlChange) persistence.Control {
	e.t.Helper()
	row, err := e.s.SetControl(e.ctx, c)
	if err != nil {
		e.t.Fatalf("set control %+v: %v", c, err)
	}
	return row
}

func (e *env) listControls() []persistence.Control {
	e.t.Helper()
	cs, err := e.s.ListControls(e.ctx)
	if err != nil {
		e.t.Fatalf("list controls: %v", err)
	}
	return cs
}

func (e *env) audit(f persistence.AuditFilter) []persistence.AuditEntry {
	e.t.Helper()
	as, err := e.s.ListAudit(e.ctx, f)
	if err != nil {
		e.t.Fatalf("list audit %+v: %v", f, err)
	}
	return as
}

// pause pauses (or resumes) a target as node-1.
func pause(source, unit string, paused bool, reason string) persistence.ControlChange {
	action := "pause"
	if !paused {
		action = "resume"
	}
	return persistence.ControlChange{Source: source, Unit: unit, Paused: ptr(paused), Node: "node-1",
		Action: action, By: "ops", Reason: reason}
}

// controlsSummary is what ListControls says, one line per row.
func controlsSummary(cs []persistence.Control) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, fmt.Sprintf("%s|%s paused=%t seek=%q id=%d done=%d by=%s reason=%s",
			c.Source, c.Unit, c.Paused, c.Seek, c.SeekID, c.SeekDoneID, c.By, c.Reason))
	}
	return out
}

func testControlsPauseResume(e *env) {
	if cs := e.listControls(); len(cs) != 0 {
		e.t.Fatalf("a new store lists controls: %v", controlsSummary(cs))
	}
	before := e.now().Add(-time.Second)
	row := e.setControl(pause("orders", "orders/3", true, "poison"))
	if !row.Paused || row.Source != "orders" || row.Unit != "orders/3" || row.By != "ops" || row.Reason != "poison" {
		e.t.Errorf("returned row %+v, want orders/3 paused by ops for poison", row)
	}
	if row.UpdatedAt.Before(before) || row.UpdatedAt.After(e.now().Add(time.Minute)) {
		e.t.Errorf("updated_at %s, want about %s (the store's clock)", row.UpdatedAt, e.now())
	}
	e.setControl(pause("billing", "", true, "deploy"))
	e.setControl(pause("orders", "", false, "whole source resumed"))
	got := controlsSummary(e.listControls())
	want := []string{
		`billing| paused=true seek="" id=0 done=0 by=ops reason=deploy`,
		`orders| paused=false seek="" id=0 done=0 by=ops reason=whole source resumed`,
		`orders|orders/3 paused=true seek="" id=0 done=0 by=ops reason=poison`,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		e.t.Errorf("controls:\n got %q\nwant %q", got, want)
	}
	cs := e.listControls()
	for _, c := range []struct {
		source, unit string
		paused       bool
	}{{"orders", "orders/3", true}, {"orders", "orders/1", false}, {"billing", "billing/0", true}, {"other", "other/0", false}} {
		if p := persistence.Paused(cs, c.source, c.unit); p != c.paused {
			e.t.Errorf("Paused(%s) = %t, want %t", c.unit, p, c.paused)
		}
	}
	e.setControl(pause("orders", "orders/3", false, "fixed"))
	if persistence.Paused(e.listControls(), "orders", "orders/3") {
		e.t.Error("orders/3 still paused after its resume")
	}
	as := e.audit(persistence.AuditFilter{})
	if len(as) != 4 {
		e.t.Fatalf("audit holds %d entries, want 4 (one per change): %+v", len(as), as)
	}
	for i, a := range as {
		if i > 0 && a.ID <= as[i-1].ID {
			e.t.Errorf("audit ids not increasing: %d after %d", a.ID, as[i-1].ID)
		}
		if a.Node != "node-1" || a.By != "ops" || a.At.Before(before) {
			e.t.Errorf("audit entry %+v: want node-1, by ops, at the store's time", a)
		}
	}
	if a := as[0]; a.Action != "pause" || a.Source != "orders" || a.Unit != "orders/3" || a.Reason != "poison" {
		e.t.Errorf("first audit entry %+v, want the pause of orders/3 for poison", a)
	}
	if a := as[3]; a.Action != "resume" || a.Unit != "orders/3" || a.Reason != "fixed" {
		e.t.Errorf("last audit entry %+v, want the resume of orders/3", a)
	}
}

func testControlsSeekCounts(e *env) {
	e.setControl(pause("orders", "orders/0", true, "first"))
	seek := func(to string) persistence.Control {
		return e.setControl(persistence.ControlChange{Source: "orders", Unit: "orders/0", Seek: to, Node: "node-2",
			Action: "seek", Args: "to=" + to, By: "ops", Reason: "rewind"})
	}
	r1 := seek("100")
	r2 := seek("earliest")
	if r1.SeekID != 1 || r2.SeekID != 2 || r2.Seek != "earliest" || r2.SeekDoneID != 0 {
		e.t.Errorf("seeks: %+v then %+v, want seek ids 1 and 2, the newest target, none done", r1, r2)
	}
	if !r2.Paused {
		e.t.Error("a seek changed the paused flag")
	}
	// a change of the flag leaves the seek alone
	r3 := e.setControl(pause("orders", "orders/0", false, "go"))
	if r3.Seek != "earliest" || r3.SeekID != 2 || r3.Paused {
		e.t.Errorf("after resume: %+v, want the seek kept, not paused", r3)
	}
	as := e.audit(persistence.AuditFilter{Unit: "orders/0"})
	if len(as) != 4 || as[1].Args != "to=100" || as[2].Node != "node-2" || as[2].Action != "seek" {
		e.t.Errorf("audit of orders/0: %+v", as)
	}
}

func testControlsInvalid(e *env) {
	for name, c := range map[string]persistence.ControlChange{
		"no source":  {Paused: ptr(true), Action: "pause"},
		"no action":  {Source: "orders", Paused: ptr(true)},
		"no changes": {Source: "orders", Action: "pause"},
	} {
		if _, err := e.s.SetControl(e.ctx, c); err == nil {
			e.t.Errorf("%s: SetControl succeeded", name)
		}
	}
	if _, err := e.s.WriteAudit(e.ctx, persistence.AuditEntry{Node: "n"}); err == nil {
		e.t.Error("WriteAudit without an action succeeded")
	}
	if cs, as := e.listControls(), e.audit(persistence.AuditFilter{}); len(cs) != 0 || len(as) != 0 {
		e.t.Errorf("refused changes wrote %d rows and %d audit entries", len(cs), len(as))
	}
}

func testAuditFilter(e *env) {
	e.setControl(pause("orders", "orders/1", true, "a"))
	e.advance(time.Minute)
	if e.clk == nil {
		// without a manual clock the store's own time must pass
		t0 := e.audit(persistence.AuditFilter{})[0].At
		e.waitFor(5*time.Second, "the store's clock to pass the first entry", func() bool { return e.now().After(t0.Add(10 * time.Millisecond)) })
	}
	mid := e.now()
	w, err := e.s.WriteAudit(e.ctx, persistence.AuditEntry{Node: "node-2", By: "ops", Action: "drain", Args: "node=node-2", Reason: "upgrade"})
	if err != nil {
		e.t.Fatalf("write audit: %v", err)
	}
	if w.ID == 0 || w.At.IsZero() {
		e.t.Errorf("WriteAudit returned %+v: want its id and time", w)
	}
	e.setControl(pause("orders", "orders/2", true, "b"))
	e.setControl(pause("billing", "", true, "c"))
	reasons := func(as []persistence.AuditEntry) string {
		s := ""
		for _, a := range as {
			s += a.Reason + ","
		}
		return s
	}
	for _, c := range []struct {
		f    persistence.AuditFilter
		want string
	}{
		{persistence.AuditFilter{}, "a,upgrade,b,c,"},
		{persistence.AuditFilter{Source: "orders"}, "a,b,"},
		{persistence.AuditFilter{Unit: "orders/2"}, "b,"},
		{persistence.AuditFilter{Since: mid.Add(-5 * time.Millisecond)}, "upgrade,b,c,"},
		{persistence.AuditFilter{Limit: 2}, "b,c,"},
		{persistence.AuditFilter{Source: "orders", Limit: 1}, "b,"},
	} {
		if got := reasons(e.audit(c.f)); got != c.want {
			e.t.Errorf("ListAudit(%+v) = %s, want %s", c.f, got, c.want)
		}
	}
}

func testControlsConcurrent(e *env) {
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := e.s.SetControl(e.ctx, persistence.ControlChange{Source: "orders", Unit: "orders/0",
				Seek: fmt.Sprint(i), Node: fmt.Sprintf("node-%d", i), Action: "seek", By: "ops"})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			e.t.Fatalf("concurrent SetControl: %v", err)
		}
	}
	cs := e.listControls()
	if len(cs) != 1 || cs[0].SeekID != n {
		e.t.Errorf("after %d concurrent seeks: %v, want one row with seek id %d", n, controlsSummary(cs), n)
	}
	if as := e.audit(persistence.AuditFilter{}); len(as) != n {
		e.t.Errorf("%d audit entries, want %d", len(as), n)
	}
}

// testControlsSurviveReopen: the rows and the audit are in the database,
// seen by another store on it (another node, a restarted one).
func testControlsSurviveReopen(e *env) {
	e.setControl(pause("orders", "orders/2", true, "kept"))
	s2, err := e.h.Schema.Reopen(e.t, e.s)
	if err != nil {
		e.t.Fatal(err)
	}
	defer s2.Close()
	cs, err := s2.ListControls(e.ctx)
	if err != nil || !persistence.Paused(cs, "orders", "orders/2") {
		e.t.Fatalf("controls after reopen: %v, %v; want orders/2 paused", controlsSummary(cs), err)
	}
	as, err := s2.ListAudit(e.ctx, persistence.AuditFilter{Unit: "orders/2"})
	if err != nil || len(as) != 1 || as[0].Reason != "kept" {
		e.t.Fatalf("audit after reopen: %+v, %v", as, err)
	}
	// a change through the second store is seen by the first
	if _, err := s2.SetControl(e.ctx, pause("orders", "orders/2", false, "done")); err != nil {
		e.t.Fatal(err)
	}
	if persistence.Paused(e.listControls(), "orders", "orders/2") {
		e.t.Error("a resume through another store is not seen")
	}
}
