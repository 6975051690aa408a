package testkit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/internal/syncbuf"
	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/persistence/storetest"
	"github.com/drover-dev/drover/testkit"
)

// The edges of issue 10 items 6 and 7, in the list of edges_test.go:
// batches that could never commit, and store errors that wedge a unit.

// hasBad reports whether a JSON document has a member "bad" that is not
// null: what the CHECK constraint (doc->>'bad' IS NULL) refuses.
func hasBad(doc []byte) bool {
	var obj map[string]json.RawMessage
	if json.Unmarshal(doc, &obj) != nil {
		return false
	}
	v, ok := obj["bad"]
	return ok && string(v) != "null"
}

// batchLimit is the store's limit on the bytes of one batch in the
// batch-size edges.
const batchLimit = 2048

// limitedCluster is a one-node edge cluster whose store refuses a batch of
// more than batchLimit bytes.
func limitedCluster(t *testing.T, seed uint64) *testkit.Cluster {
	t.Helper()
	c := edgeCluster(t, testkit.Config{Seed: seed, Nodes: 1})
	c.StoreFaults().LimitBatchBytes(batchLimit)
	return c
}

// allWithin lets c settle and checks that table holds n records and no
// apply failed: every batch kept within batchLimit bytes.
func allWithin(t *testing.T, c *testkit.Cluster, table string, n int) error {
	if err := settle(c); err != nil {
		return err
	}
	if got := len(records(t, c.Store(), table)); got != n {
		return fmt.Errorf("%d records, want %d", got, n)
	}
	if f := c.Log("failed"); len(f) != 0 {
		return fmt.Errorf("applies failed: %v; want every batch within %d bytes", f, batchLimit)
	}
	return nil
}

// 6a. A fetch that holds more bytes than batch_bytes is applied in several
// batches, in order, each within the store's limit on one statement
// (before the fix it was one batch the store could never take, retried
// forever).
func edgeBatchBytes(t *testing.T) error {
	c := limitedCluster(t, 41)
	must(c.AddStream(actors.SourceSpec{Name: "s", KeyField: "id", BatchSize: 200, BatchBytes: batchLimit, MaxMessageBytes: 1024, MaxDeadLetterBytes: 256}, 1))
	must(c.Publish("s", "0", upserts(200, "many")...)) // ≈ 12 KB, one fetch
	mustStart(t, c)
	return allWithin(t, c, "s", 200)
}

// 6a. The same for a queue: every message applied and acked.
func edgeQueueBatchBytes(t *testing.T) error {
	c := limitedCluster(t, 47)
	must(c.AddQueue(actors.SourceSpec{Name: "q", KeyField: "id", BatchSize: 100, BatchBytes: batchLimit, MaxMessageBytes: 1024, MaxDeadLetterBytes: 256}, 5*time.Second))
	must(c.Publish("q", "", upserts(150, "many")...))
	mustStart(t, c)
	return allWithin(t, c, "q", 150)
}

// 6b. An oversize message's dead letter keeps only its first
// max_dead_letter_bytes and records its size, so a message larger than the
// store's limit cannot wedge its unit (before the fix the dead letter kept
// the whole body).
func edgeDeadLetterCut(t *testing.T) error {
	c := limitedCluster(t, 42)
	must(c.AddStream(actors.SourceSpec{Name: "s", KeyField: "id", BatchSize: 50, BatchBytes: batchLimit, MaxMessageBytes: 1024, MaxDeadLetterBytes: 256}, 1))
	mustStart(t, c)
	c.Run(time.Second)
	huge := `{"id":"huge","blob":"` + strings.Repeat("z", 8000) + `"}`
	msgs := append(upserts(3, "before"), brokers.Message{Value: []byte(huge)})
	must(c.Publish("s", "0", append(msgs, upserts(3, "after")...)...))
	if err := settle(c); err != nil {
		return err
	}
	if n := len(records(t, c.Store(), "s")); n != 6 {
		return fmt.Errorf("%d records, want the 6 that fit", n)
	}
	dl := deadLetters(t, c.Store(), "s")
	if len(dl) != 1 {
		return fmt.Errorf("%d dead letters, want 1", len(dl))
	}
	if d := dl[0]; len(d.Payload) != 256 || d.PayloadBytes != int64(len(huge)) || !d.Cut() || string(d.Payload) != huge[:256] {
		return fmt.Errorf("dead letter keeps %d bytes and records %d (cut %v), want the first 256 of %d", len(d.Payload), d.PayloadBytes, d.Cut(), len(huge))
	}
	return nil
}

// 7a. Records a stream batch holds that the store refuses for good (a
// CHECK constraint) are dead-lettered with the store's message, alone; the
// rest of the batch is applied, in order, the checkpoint moves on, and no
// failure is counted (before the fix the batch was retried whole, for
// ever).
func edgeRefusedStream(t *testing.T) error {
	c := edgeCluster(t, testkit.Config{Seed: 43, Nodes: 1})
	c.StoreFaults().RefuseDocs("s", hasBad)
	must(c.AddStream(actors.SourceSpec{Name: "s", KeyField: "id", BatchSize: 50}, 1))
	pos := must(c.Publish("s", "0", storetest.RefusedDocs(40, "d", 5, 17, 18, 39)...))
	mustStart(t, c)
	if err := settle(c); err != nil {
		return err
	}
	if err := refusedOnly(t, c, "s", 40, "d", 5, 17, 18, 39); err != nil {
		return err
	}
	cp, err := c.Store().Checkpoint(context.Background(), "s/0")
	if err != nil || cp.Position != pos[39] {
		return fmt.Errorf("checkpoint %q (%v), want %s: the last message", cp.Position, err, pos[39])
	}
	if f := c.Log("failed"); len(f) != 0 {
		return fmt.Errorf("failures counted: %v; a refusal is not a failure of the unit", f)
	}
	return nil
}

// 7b. The same for a queue: the refused messages are dead-lettered, every
// message is acked.
func edgeRefusedQueue(t *testing.T) error {
	c := edgeCluster(t, testkit.Config{Seed: 44, Nodes: 1})
	c.StoreFaults().RefuseDocs("q", hasBad)
	must(c.AddQueue(actors.SourceSpec{Name: "q", KeyField: "id", BatchSize: 20}, 5*time.Second))
	mustStart(t, c)
	c.Run(time.Second)
	must(c.Publish("q", "", storetest.RefusedDocs(30, "m", 0, 11, 29)...))
	if err := settle(c); err != nil {
		return err
	}
	return refusedOnly(t, c, "q", 30, "m", 0, 11, 29)
}

// 7c. A handler's write the store refuses for good, returned by the
// handler, is handled the same way: the messages it fails for alone are
// dead-lettered with the store's message, the others' writes commit.
func edgeRefusedHandler(t *testing.T) error {
	c := edgeCluster(t, testkit.Config{Seed: 45, Nodes: 1})
	c.MemoryStore().Refuse("docs", "bad")
	h := func(ctx context.Context, tx persistence.Tx, b actors.Batch) error {
		for _, m := range b.Messages {
			if err := tx.Put(ctx, "docs", string(m.Key), m.Value); err != nil {
				return fmt.Errorf("write %s: %w", m.Key, err)
			}
		}
		return nil
	}
	must(c.AddStream(actors.SourceSpec{Name: "h", BatchSize: 25, Handler: h}, 1))
	must(c.Publish("h", "0", storetest.RefusedDocs(20, "h", 3, 4, 12)...))
	mustStart(t, c)
	if err := settle(c); err != nil {
		return err
	}
	got := records(t, c.Store(), "docs")
	if len(got) != 17 {
		return fmt.Errorf("%d documents written by the handler, want 17", len(got))
	}
	dl := deadLetters(t, c.Store(), "h")
	if len(dl) != 3 {
		return fmt.Errorf("%d dead letters, want 3", len(dl))
	}
	for _, d := range dl {
		if !strings.Contains(d.Reason, "check constraint") || !strings.Contains(string(d.Payload), `"bad":true`) {
			return fmt.Errorf("dead letter %s: reason %q payload %s; want the store's message and the message body", d.Position, d.Reason, d.Payload)
		}
	}
	return nil
}

// 7d. Transient store errors retry the same batch and never dead-letter.
func edgeTransientNotDeadLettered(t *testing.T) error {
	c := edgeCluster(t, testkit.Config{Seed: 46, Nodes: 1})
	must(c.AddStream(actors.SourceSpec{Name: "s", KeyField: "id", BatchSize: 50}, 1))
	mustStart(t, c)
	c.Run(time.Second)
	c.StoreFaults().FailNext("apply", 3)
	must(c.Publish("s", "0", storetest.RefusedDocs(20, "t")...))
	c.Run(10 * time.Second) // Settle would clear the faults
	if err := settle(c); err != nil {
		return err
	}
	if dl := deadLetters(t, c.Store(), "s"); len(dl) != 0 {
		return fmt.Errorf("%d dead letters after transient failures, want none: %+v", len(dl), dl)
	}
	if n := len(records(t, c.Store(), "s")); n != 20 {
		return fmt.Errorf("%d records, want 20", n)
	}
	if f := c.Log("failed"); len(f) != 3 {
		return fmt.Errorf("%d failures counted, want the 3 injected", len(f))
	}
	return nil
}

// refusedOnly checks that of n storetest.RefusedDocs(prefix) the bad ones are the only
// dead letters, each with the store's message, and the others applied.
func refusedOnly(t *testing.T, c *testkit.Cluster, source string, n int, prefix string, bad ...int) error {
	t.Helper()
	got := records(t, c.Store(), source)
	if len(got) != n-len(bad) {
		return fmt.Errorf("%d records, want %d", len(got), n-len(bad))
	}
	for _, b := range bad {
		if _, ok := got[fmt.Sprintf("%s-%d", prefix, b)]; ok {
			return fmt.Errorf("refused record %s-%d was written", prefix, b)
		}
	}
	dl := deadLetters(t, c.Store(), source)
	if len(dl) != len(bad) {
		return fmt.Errorf("%d dead letters, want %d", len(dl), len(bad))
	}
	for _, d := range dl {
		if !strings.HasPrefix(d.Reason, "refused by the store: ") || !strings.Contains(d.Reason, "violates a check constraint") || !hasBad(d.Payload) {
			return fmt.Errorf("dead letter %s: reason %q payload %s; want the store's message and the message body", d.Position, d.Reason, d.Payload)
		}
	}
	if u := must(c.Tree("node-1")).Sources[0].Units[0]; u.DeadLettered != int64(len(bad)) || u.Rejected != 0 {
		return fmt.Errorf("unit counts %d dead-lettered, %d rejected; want %d, 0 (refusals are not rejections)", u.DeadLettered, u.Rejected, len(bad))
	}
	return nil
}

// 7d. A refusal of a permanent class that the store would not repeat (a
// race of concurrent CREATE TABLE IF NOT EXISTS on PostgreSQL, a unique
// violation on its catalog) dead-letters nothing: a record refused alone is
// tried alone once more before it is dead-lettered. Found by the chaos run:
// the demo's audit handler creates its table in every batch, and the first
// one-message batches of units starting together dead-lettered their record.
func edgeRefusalRace(t *testing.T) error {
	c := edgeCluster(t, testkit.Config{Seed: 48, Nodes: 1})
	must(c.AddStream(actors.SourceSpec{Name: "s", KeyField: "id", BatchSize: 50}, 1))
	must(c.AddQueue(actors.SourceSpec{Name: "q", KeyField: "id", BatchSize: 50}, 5*time.Second))
	mustStart(t, c)
	c.Run(2 * time.Second)
	// one message at a time, so that each batch holds one record; its
	// first apply is refused
	c.StoreFaults().RaceNext(1)
	must(c.Publish("s", "0", upserts(1, "race-s")...))
	c.Run(5 * time.Second)
	c.StoreFaults().RaceNext(1)
	must(c.Publish("q", "", upserts(1, "race-q")...))
	c.Run(5 * time.Second)
	if err := settle(c); err != nil {
		return err
	}
	for _, src := range []string{"s", "q"} {
		if dl := deadLetters(t, c.Store(), src); len(dl) != 0 {
			return fmt.Errorf("%s: %d dead letters (%s), want none: the refusal was not repeated", src, len(dl), dl[0].Reason)
		}
		if n := len(records(t, c.Store(), src)); n != 1 {
			return fmt.Errorf("%s: %d records, want 1", src, n)
		}
	}
	if f := c.Log("failed"); len(f) != 0 {
		return fmt.Errorf("applies failed: %v; a refusal is no failure", f)
	}
	return nil
}

// A stream whose records the store refuses one after another writes one
// WARN line per RetryLogEvery per unit, counting the ones left out, not a
// line per record; every refused record is still dead-lettered.
func TestRefusalWarningsRateLimited(t *testing.T) {
	var logs syncbuf.Buffer
	c := edgeCluster(t, testkit.Config{Seed: 46, Nodes: 1, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Tuning: actors.Tuning{RetryLogEvery: time.Hour}})
	c.StoreFaults().RefuseDocs("s", hasBad)
	bad := make([]int, 0, 30)
	for i := 0; i < 60; i += 2 {
		bad = append(bad, i)
	}
	must(c.AddStream(actors.SourceSpec{Name: "s", KeyField: "id", BatchSize: 20}, 1))
	must(c.Publish("s", "0", storetest.RefusedDocs(60, "w", bad...)...))
	mustStart(t, c)
	if err := settle(c); err != nil {
		t.Fatal(err)
	}
	if err := refusedOnly(t, c, "s", 60, "w", bad...); err != nil {
		t.Fatal(err)
	}
	lines := strings.Count(logs.String(), "the store refuses a record")
	if lines != 1 {
		t.Fatalf("%d WARN lines for %d refused records within RetryLogEvery, want 1:\n%s", lines, len(bad), logs.String())
	}
}
