package storetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/persistence"
)

// Helpers of the stores' end-to-end refusal tests (issue 10 item 7): a
// source whose records table carries the CHECK constraint
// doc->>'bad' IS NULL, run on the testkit against the real store.

// RefusedDocs makes n upserts keyed by id <prefix>-<i>; those whose index
// is in bad carry "bad": true.
func RefusedDocs(n int, prefix string, bad ...int) []brokers.Message {
	out := make([]brokers.Message, n)
	for i := range out {
		extra := ""
		if slices.Contains(bad, i) {
			extra = `,"bad":true`
		}
		out[i] = brokers.Message{Key: fmt.Appendf(nil, "%s-%d", prefix, i), Value: fmt.Appendf(nil, `{"id":"%s-%d","n":%d%s}`, prefix, i, i, extra)}
	}
	return out
}

// PutAll is a handler that writes every message's body under its key.
func PutAll(table string) actors.Handler {
	return func(ctx context.Context, tx persistence.Tx, b actors.Batch) error {
		for _, m := range b.Messages {
			if err := tx.Put(ctx, table, string(m.Key), m.Value); err != nil {
				return fmt.Errorf("write %s: %w", m.Key, err)
			}
		}
		return nil
	}
}

// Contents is the part of a store a check reads back: records, dead
// letters and checkpoints.
type Contents interface {
	persistence.Records
	persistence.DeadLetters
	persistence.Checkpoints
}

// CheckRefused checks what a run over RefusedDocs left in store for
// source (one partition, "0"; pos the positions of the published docs):
// records records, none of them bad; a dead letter for each bad index, at
// its position, whose reason is the store's message (containing reason)
// and whose payload is the body; the checkpoint at the last position.
func CheckRefused(t *testing.T, store Contents, source string, pos []string, records int, bad []int, reason string) {
	t.Helper()
	ctx := context.Background()
	recs, err := store.Records(ctx, source, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != records {
		t.Errorf("%d records, want the %d the constraint lets through", len(recs), records)
	}
	for _, r := range recs {
		if strings.Contains(string(r.Doc), `"bad"`) {
			t.Errorf("record %s violates the constraint: %s", r.Key, r.Doc)
		}
	}
	dls, err := store.DeadLetters(ctx, persistence.DeadLetterFilter{Source: source})
	if err != nil {
		t.Fatal(err)
	}
	if len(dls) != len(bad) {
		t.Fatalf("%d dead letters, want %d: %+v", len(dls), len(bad), dls)
	}
	for i, d := range dls {
		want := pos[bad[i]]
		if d.Position != want || !strings.HasPrefix(d.Reason, "refused by the store: ") ||
			!strings.Contains(d.Reason, reason) || !strings.Contains(string(d.Payload), `"bad":true`) {
			t.Errorf("dead letter at %s (want %s): reason %q payload %s; want the store's message (%s) and the body", d.Position, want, d.Reason, d.Payload, reason)
		}
	}
	cp, err := store.Checkpoint(ctx, source+"/0")
	if err != nil || cp.Position != pos[len(pos)-1] {
		t.Errorf("checkpoint %q (%v), want %s", cp.Position, err, pos[len(pos)-1])
	}
}
