package testkit_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/testkit"
)

// A dead letter replayed after the config was fixed is applied, fenced by
// the unit's current token, and marked replayed; one that still fails stays
// pending with one more attempt.
func TestReplayDeadLetter(t *testing.T) {
	c := newCluster(t, testkit.Config{Seed: 29, Nodes: 2})
	spec := actors.SourceSpec{Name: "people", KeyField: "id", MaxMessageBytes: 64}
	must(c.AddStream(spec, 1))
	mustStart(t, c)
	big := `{"id":"big","bio":"` + strings.Repeat(".", 64) + `"}`
	must(c.Publish("people", "0",
		brokers.Message{Value: []byte(`{"id":"a","n":1}`)},
		brokers.Message{Value: []byte(big)},
		brokers.Message{Value: []byte(`not json`)},
	))
	mustSettle(t, c, time.Minute)
	ctx := context.Background()
	store := c.Store()
	dls := wantDeadLetters(t, store, "people", 2)
	var bigID, junkID int64
	for _, dl := range dls {
		if dl.Position == "1" {
			bigID = dl.ID
		} else {
			junkID = dl.ID
		}
	}
	// a node holds the unit's lease; the replay runs under its current
	// token, with the fix (a larger limit)
	fixed := spec
	fixed.MaxMessageBytes = 1 << 20
	res, err := actors.Replay(ctx, store, fixed, bigID)
	if err != nil || !res.Applied {
		t.Fatalf("replay of the oversize message: %+v %v", res, err)
	}
	if got := records(t, store, "people")["big"]; got == "" {
		t.Fatal("replayed message not in the table")
	}
	dl, _ := store.DeadLetter(ctx, bigID)
	if dl.Status != persistence.DeadLetterReplayed {
		t.Fatalf("status %s after replay", dl.Status)
	}
	// replaying it again is refused: it is no longer pending
	if _, err := actors.Replay(ctx, store, fixed, bigID); err == nil {
		t.Fatal("second replay of a replayed dead letter accepted")
	}
	// the junk stays junk: pending, one more attempt
	res, err = actors.Replay(ctx, store, fixed, junkID)
	if err != nil || res.Applied || res.Reason == "" {
		t.Fatalf("replay of junk: %+v %v", res, err)
	}
	dl, _ = store.DeadLetter(ctx, junkID)
	if dl.Status != persistence.DeadLetterPending || dl.Attempts != 2 {
		t.Fatalf("junk after replay: status %s attempts %d", dl.Status, dl.Attempts)
	}
	checkReport(t, c)
}

// A dead letter that still fails when replayed keeps the trace id it
// recorded of its message (the replayed message has no headers).
func TestReplayKeepsTheTraceID(t *testing.T) {
	c := newCluster(t, testkit.Config{Seed: 37, Nodes: 1})
	spec := actors.SourceSpec{Name: "people", KeyField: "id"}
	must(c.AddStream(spec, 1))
	mustStart(t, c)
	const id = "4bf92f3577b34da6a3ce929d0e0e4736"
	must(c.Publish("people", "0", brokers.Message{Value: []byte(`not json`),
		Headers: []brokers.Header{{Key: "traceparent", Value: []byte("00-" + id + "-00f067aa0ba902b7-01")}}}))
	mustSettle(t, c, time.Minute)
	store := c.Store()
	dl := wantDeadLetters(t, store, "people", 1)[0]
	if !strings.HasSuffix(dl.Reason, " trace_id="+id) {
		t.Fatalf("dead letter reason %q does not end with its trace id", dl.Reason)
	}
	res, err := actors.Replay(context.Background(), store, spec, dl.ID)
	if err != nil || res.Applied {
		t.Fatalf("replay of junk: %+v %v", res, err)
	}
	again, err := store.DeadLetter(context.Background(), dl.ID)
	if err != nil || again.Attempts != 2 || !strings.HasSuffix(again.Reason, " trace_id="+id) {
		t.Fatalf("after the replay: reason %q attempts %d (%v); want the trace id kept", again.Reason, again.Attempts, err)
	}
	checkReport(t, c)
}

// Issue 10 item 6: a dead letter whose payload was cut at
// max_dead_letter_bytes holds only the first bytes of its message: replay
// refuses it, saying why, and leaves it pending and untouched.
func TestReplayRefusesCutDeadLetter(t *testing.T) {
	c := newCluster(t, testkit.Config{Seed: 31, Nodes: 1})
	spec := actors.SourceSpec{Name: "people", KeyField: "id", MaxMessageBytes: 64, MaxDeadLetterBytes: 32}
	must(c.AddStream(spec, 1))
	mustStart(t, c)
	big := `{"id":"big","bio":"` + strings.Repeat(".", 64) + `"}`
	must(c.Publish("people", "0", brokers.Message{Value: []byte(big)}))
	mustSettle(t, c, time.Minute)
	ctx := context.Background()
	store := c.Store()
	dls := wantDeadLetters(t, store, "people", 1)
	dl := dls[0]
	if string(dl.Payload) != big[:32] || dl.PayloadBytes != int64(len(big)) || !dl.Cut() {
		t.Fatalf("dead letter payload %q (%d bytes recorded, cut %v), want the first 32 bytes of the %d-byte message", dl.Payload, dl.PayloadBytes, dl.Cut(), len(big))
	}
	fixed := spec
	fixed.MaxMessageBytes = 1 << 20
	res, err := actors.Replay(ctx, store, fixed, dl.ID)
	if !errors.Is(err, actors.ErrNotReplayable) || res.Applied || !strings.Contains(err.Error(), "not whole") {
		t.Fatalf("replay of a cut dead letter: %+v %v; want ErrNotReplayable saying the message is not whole", res, err)
	}
	after, _ := store.DeadLetter(ctx, dl.ID)
	if after.Status != persistence.DeadLetterPending || after.Attempts != 1 {
		t.Fatalf("after the refused replay: status %s attempts %d, want pending, 1", after.Status, after.Attempts)
	}
	if got := records(t, store, "people")["big"]; got != "" {
		t.Fatalf("the cut message was applied: %s", got)
	}
	checkReport(t, c)
}

// wantDeadLetters returns the dead letters of source, failing t unless
// there are n.
func wantDeadLetters(t *testing.T, s persistence.Store, source string, n int) []persistence.DeadLetter {
	t.Helper()
	dls := deadLetters(t, s, source)
	if len(dls) != n {
		t.Fatalf("%d dead letters, want %d", len(dls), n)
	}
	return dls
}
