package debug

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/drover-dev/drover/persistence"
)

// AuditLister is implemented by a Node that can read the store's audit of
// controls (drover_control_audit): GET /debug/audit serves it.
type AuditLister interface {
	Audit(ctx context.Context, f persistence.AuditFilter) ([]persistence.AuditEntry, error)
}

// AuditAnswer is the JSON of GET /debug/audit: the store's entries,
// oldest first. The audit is the store's, so every node answers the same
// for the whole cluster.
type AuditAnswer struct {
	Node    string       `json:"node"`
	Entries []AuditEntry `json:"entries"`
}

// AuditEntry is one control carried out, as the store recorded it.
type AuditEntry struct {
	ID     int64     `json:"id"`
	At     time.Time `json:"at"`
	Node   string    `json:"node"`
	By     string    `json:"by,omitempty"`
	Action string    `json:"action"`
	Source string    `json:"source,omitempty"`
	Unit   string    `json:"unit,omitempty"`
	Args   string    `json:"args,omitempty"`
	Reason string    `json:"reason,omitempty"`
}

// audit serves GET /debug/audit?unit=…&source=…&since=…&limit=… (the
// filters of GET /debug/events, without scope).
func (s *Server) audit(w http.ResponseWriter, r *http.Request) {
	al, ok := s.cfg.Node.(AuditLister)
	if !ok {
		text(w, http.StatusNotImplemented, "this node keeps no audit of controls")
		return
	}
	q, err := parseEventsQuery(r.URL.Query(), s.cfg.Clock.Now())
	if err != nil {
		text(w, http.StatusBadRequest, err.Error())
		return
	}
	es, err := al.Audit(r.Context(), persistence.AuditFilter{Source: q.filter.Source, Unit: q.filter.Unit, Since: q.filter.Since, Limit: q.filter.Limit})
	if err != nil {
		text(w, http.StatusServiceUnavailable, "read the audit of controls: "+err.Error())
		return
	}
	out := make([]AuditEntry, len(es))
	for i, e := range es {
		out[i] = AuditEntry{ID: e.ID, At: e.At.UTC(), Node: e.Node, By: e.By, Action: e.Action, Source: e.Source, Unit: e.Unit, Args: e.Args, Reason: e.Reason}
	}
	b, err := json.Marshal(AuditAnswer{Node: s.cfg.Node.Tree().Node, Entries: out})
	s.writeJSON(w, "audit", b, err)
}
