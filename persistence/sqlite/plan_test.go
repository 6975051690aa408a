package sqlite

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestRenewPlans pins the query plans of a renewal round's per-lease
// statements: each pair of the JSON list is looked up by the leases'
// primary key. With the index on owner (migration 4) SQLite planned the
// UPDATE as a scan of the owner's rows with a scan of the whole list for
// each: 10,000 leases took over 10 s, longer than the store's timeout, and
// every round failed.
func TestRenewPlans(t *testing.T) {
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "plan.db"), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for name, q := range map[string]string{"renew many": sqlRenewMany, "held": sqlLeaseHeld} {
		rows, err := s.db.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+q, "node-1", 1, "node-1", `{"u/0":1}`)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		text := strings.Join(plan, "\n")
		if !strings.Contains(text, "sqlite_autoindex_drover_leases_1 (unit=?)") || strings.Contains(text, "drover_leases_owner") {
			t.Errorf("%s: plan\n%s\nwant each pair looked up by unit, not the index on owner", name, text)
		}
	}
}
