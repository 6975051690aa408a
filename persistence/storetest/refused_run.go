package storetest

import (
	"testing"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/testkit"
)

// Refusal is one store's end-to-end refusal test (issue 10 item 7), which
// RunRefused runs.
type Refusal struct {
	// Seed is the testkit's seed.
	Seed uint64
	// Store prepares a fresh store for one subtest. It returns the
	// testkit's Store function and constrain, which (when not nil) runs
	// after the cluster started and before the docs are published, and
	// puts the CHECK constraint doc->>'bad' IS NULL on the records table.
	Store func(t *testing.T) (open func(*testkit.Clock) (persistence.Store, error), constrain func(t *testing.T, c *testkit.Cluster))
	// Records is how many records the run leaves (CheckRefused).
	Records int
	// Reason is what the store's message contains (CheckRefused).
	Reason string
	// Backlog publishes the docs before the cluster starts, so that they
	// wait for the unit's first fetch (constrain must then be nil).
	Backlog bool
}

// RunRefused runs r as two subtests, "records" (a keyed source) and
// "handler" (a handler that Puts every message, PutAll): the cluster of
// one node publishes 30 RefusedDocs, three of them bad, on source
// "orders", settles, loses and duplicates nothing, and leaves what
// CheckRefused checks.
func RunRefused(t *testing.T, r Refusal) {
	for _, handler := range []bool{false, true} {
		name := map[bool]string{false: "records", true: "handler"}[handler]
		t.Run(name, func(t *testing.T) {
			open, constrain := r.Store(t)
			c, err := testkit.New(testkit.Config{Seed: r.Seed, Nodes: 1, Store: open})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			spec := actors.SourceSpec{Name: "orders", KeyField: "id", BatchSize: 100}
			if handler {
				spec = actors.SourceSpec{Name: "orders", BatchSize: 100, Handler: PutAll("orders")}
			}
			if _, err := c.AddStream(spec, 1); err != nil {
				t.Fatal(err)
			}
			bad := []int{3, 4, 20}
			var pos []string
			publish := func() {
				var err error
				if pos, err = c.Publish("orders", "0", RefusedDocs(30, "k", bad...)...); err != nil {
					t.Fatal(err)
				}
			}
			if r.Backlog {
				publish()
			}
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			if constrain != nil {
				constrain(t, c)
			}
			if !r.Backlog {
				publish()
			}
			if !c.Settle(time.Minute) {
				t.Fatalf("did not settle: %v", c.Report().Violations)
			}
			if r := c.Report(); r.Lost != 0 || r.Duplicated != 0 || len(r.Violations) != 0 {
				t.Fatalf("lost=%d duplicated=%d %v", r.Lost, r.Duplicated, r.Violations)
			}
			CheckRefused(t, c.Store(), "orders", pos, r.Records, bad, r.Reason)
		})
	}
}
