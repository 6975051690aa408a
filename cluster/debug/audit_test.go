package debug

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/persistence"
)

type auditNode struct {
	*fakeNode
	got persistence.AuditFilter
}

func (a *auditNode) Audit(_ context.Context, f persistence.AuditFilter) ([]persistence.AuditEntry, error) {
	a.got = f
	return []persistence.AuditEntry{{ID: 1, At: time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC), Node: "n1", By: "ann", Action: "pause", Source: "orders", Unit: "orders/3", Reason: "poison"}}, nil
}

func TestAuditServesTheStoresEntries(t *testing.T) {
	an := &auditNode{fakeNode: &fakeNode{trees: []actors.Tree{sampleTree("n1")}}}
	s := start(t, Config{Node: an, Token: "tok"})
	base := "http://" + s.Addr() + "/debug/audit"
	if r := get(t, base); r.code != http.StatusUnauthorized {
		t.Errorf("without the token: %d", r.code)
	}
	r := get(t, base+"?unit=orders/3&limit=5", "Authorization", "Bearer tok")
	var a AuditAnswer
	if r.code != http.StatusOK || json.Unmarshal([]byte(r.body), &a) != nil || len(a.Entries) != 1 || a.Node != "n1" ||
		a.Entries[0].Action != "pause" || a.Entries[0].Unit != "orders/3" || a.Entries[0].By != "ann" {
		t.Fatalf("audit: %d %s", r.code, r.body)
	}
	if an.got.Unit != "orders/3" || an.got.Limit != 5 {
		t.Errorf("filter passed on: %+v", an.got)
	}
	if r := get(t, base+"?limit=x", "Authorization", "Bearer tok"); r.code != http.StatusBadRequest {
		t.Errorf("bad limit: %d", r.code)
	}
	plain := start(t, Config{Node: &fakeNode{trees: []actors.Tree{sampleTree("n1")}}})
	if r := get(t, "http://"+plain.Addr()+"/debug/audit"); r.code != http.StatusNotImplemented {
		t.Errorf("a node without an audit: %d", r.code)
	}
}
