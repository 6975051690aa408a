package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/drover-dev/drover/persistence"
)

// ApplyPeople applies ops to store s in one batch of source people, unit
// people/0, table people, with checkpoint cp, under a lease owner takes
// for a minute: how the tests of dead-letter tools seed a store.
func ApplyPeople(t testing.TB, s persistence.Store, owner, cp string, ops ...persistence.Op) {
	t.Helper()
	ctx := context.Background()
	l, err := s.Acquire(ctx, persistence.AcquireRequest{Unit: "people/0", Owner: owner, TTL: time.Minute, Live: []string{owner}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply(ctx, &persistence.Batch{Source: "people", Unit: "people/0", Lease: l, Table: "people", Checkpoint: cp, Ops: ops}); err != nil {
		t.Fatal(err)
	}
}
