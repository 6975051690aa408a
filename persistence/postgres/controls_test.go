package postgres

import (
	"testing"

	"github.com/drover-dev/drover/persistence"
)

// The controls of one schema are not another's.
func TestControlsSchemasAreIsolated(t *testing.T) {
	url := pg.URL(t)
	a := openTest(t, url, Config{Schema: "ctl_a"})
	b := openTest(t, url, Config{Schema: "Ctl_B"})
	paused := true
	if _, err := a.SetControl(t.Context(), persistence.ControlChange{Source: "orders", Paused: &paused, Action: "pause"}); err != nil {
		t.Fatal(err)
	}
	if cs, err := b.ListControls(t.Context()); err != nil || len(cs) != 0 {
		t.Errorf("controls seen from the other schema: %v, %v", cs, err)
	}
	if as, err := b.ListAudit(t.Context(), persistence.AuditFilter{}); err != nil || len(as) != 0 {
		t.Errorf("audit seen from the other schema: %v, %v", as, err)
	}
	if cs, err := a.ListControls(t.Context()); err != nil || len(cs) != 1 {
		t.Errorf("controls of ctl_a: %v, %v; want the one written", cs, err)
	}
}
