package testkit_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/testkit"
)

// Handler mode: the user's function writes through the fenced transaction;
// a permanent error dead-letters that message and the rest of the batch is
// applied; any other error retries the whole batch (nothing half-applied).
func TestHandlerMode(t *testing.T) {
	c := newCluster(t, testkit.Config{Seed: 23, Nodes: 2})
	transient := 3
	seen := map[string]int{} // idempotency keys of committed batches
	handler := func(ctx context.Context, tx persistence.Tx, b actors.Batch) error {
		if b.Token <= 0 || b.Node == "" {
			return fmt.Errorf("batch without fencing token or node: %+v", b)
		}
		if !strings.HasPrefix(b.IdempotencyKey, b.Unit+"/") {
			return fmt.Errorf("idempotency key %q", b.IdempotencyKey)
		}
		for _, m := range b.Messages {
			if string(m.Value) == "poison" {
				return actors.Permanent(m, errors.New("cannot handle poison"))
			}
			if string(m.Value) == "flaky" && transient > 0 {
				transient--
				return errors.New("downstream busy")
			}
			n := 0
			if old, ok, err := tx.Get(ctx, "counts", string(m.Key)); err != nil {
				return err
			} else if ok {
				fmt.Sscanf(string(old), "%d", &n)
			}
			if err := tx.Put(ctx, "counts", string(m.Key), []byte(fmt.Sprint(n+1))); err != nil {
				return err
			}
		}
		seen[b.IdempotencyKey]++
		return nil
	}
	must(c.AddStream(actors.SourceSpec{Name: "events", Handler: handler, BatchSize: 7}, 3))
	must(c.AddQueue(actors.SourceSpec{Name: "tasks", Handler: handler, Slots: 2, BatchSize: 5}, 2*time.Second))
	mustStart(t, c)
	want := map[string]int{}
	for i := 0; i < 90; i++ {
		key := fmt.Sprintf("k%d", i%9)
		body := "ok"
		switch i {
		case 17, 55:
			body = "poison"
		case 30:
			body = "flaky"
		}
		if body != "poison" {
			want[key]++
		}
		m := brokers.Message{Key: []byte(key), Value: []byte(body)}
		must(c.Publish("events", fmt.Sprint(i%3), m))
		must(c.Publish("tasks", "", m))
		if body != "poison" {
			want[key]++
		}
	}
	mustSettle(t, c, time.Minute)
	checkReport(t, c)
	got := records(t, c.Store(), "counts")
	for k, n := range want {
		if got[k] != fmt.Sprint(n) {
			t.Errorf("counts[%s] = %s, want %d", k, got[k], n)
		}
	}
	for _, src := range []string{"events", "tasks"} {
		dls := deadLetters(t, c.Store(), src)
		if len(dls) != 2 {
			t.Fatalf("%s: %d dead letters, want 2", src, len(dls))
		}
		for _, dl := range dls {
			if string(dl.Payload) != "poison" || !strings.Contains(dl.Reason, "cannot handle poison") {
				t.Errorf("%s: dead letter %+v", src, dl)
			}
		}
	}
	if transient != 0 {
		t.Errorf("the transient failure was not retried (%d left)", transient)
	}
	for k, n := range seen {
		if n > 1 {
			t.Errorf("batch %s committed %d times", k, n)
		}
	}
}
