package testkit_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/testkit"
)

// seekNow asks for s and runs until the answer; a seek the unit cannot
// take now (ErrSeekConflict: failed and waiting to restart) is asked again
// every 100 ms, for up to a minute of virtual time.
func seekNow(t *testing.T, c *testkit.Cluster, s actors.Seek) (actors.SeekResult, error) {
	t.Helper()
	deadline := c.Now().Add(time.Minute)
	for {
		var res actors.SeekResult
		var err error
		done := false
		if e := c.Seek(s, func(r actors.SeekResult, e error) { res, err, done = r, e, true }); e != nil {
			return res, e
		}
		if !c.RunUntil(func() bool { return done }, 10*time.Second) {
			return res, fmt.Errorf("seek %s to %s: no answer in 10 s", s.Unit, s.To)
		}
		if !errors.Is(err, actors.ErrSeekConflict) || c.Now().After(deadline) {
			return res, err
		}
		c.Run(100 * time.Millisecond)
	}
}

func checkpointOf(t *testing.T, c *testkit.Cluster, unit string) string {
	t.Helper()
	cp, err := c.Store().Checkpoint(context.Background(), unit)
	if errors.Is(err, persistence.ErrNotFound) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return cp.Position
}

// rows reads the records table's rows by key.
func rows(t *testing.T, s persistence.Store, table string) map[string]persistence.Record {
	t.Helper()
	out := map[string]persistence.Record{}
	for after := ""; ; {
		rs, err := s.Records(context.Background(), table, after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) == 0 {
			return out
		}
		for _, r := range rs {
			out[r.Key] = r
		}
		after = rs[len(rs)-1].Key
	}
}

// Issue 13 item 2. A seek back: in the middle of a backlog (while the unit
// fetches ahead of its applies) to 150, and once settled back 100
// positions (to 200 with the checkpoint at 299). Each re-applies exactly
// the messages after its new checkpoint up to the last applied (counted
// by Report's applied, and checked message by message by the ledger's
// reapplied invariant), moves the checkpoint back, leaves the records
// table as it was (the same docs are not rewritten) and shows in the tree.
// With the batch fetched ahead kept across the seek (mutate.SeekKeepsAhead)
// the checkpoint jumps forward again and part of the seek is not applied.
func edgeSeekBack(t *testing.T) error {
	c := edgeCluster(t, testkit.Config{Seed: 41, Nodes: 1})
	must(c.AddStream(actors.SourceSpec{Name: "s", KeyField: "id", BatchSize: 10}, 1))
	mustStart(t, c)
	must(c.Publish("s", "0", upserts(300, "a")...))
	if !c.RunUntil(func() bool { return brokers.ComparePositions(checkpointOf(t, c, "s/0"), "200") >= 0 }, time.Minute) {
		return errors.New("s/0 did not reach 200 in a minute")
	}
	mid, err := seekNow(t, c, actors.Seek{Unit: "s/0", To: "150", By: "test"})
	if err != nil {
		return err
	}
	if mid.Position != "149" {
		return fmt.Errorf("seek to 150 wrote checkpoint %s, want 149", mid.Position)
	}
	if err := settle(c); err != nil {
		return fmt.Errorf("after the seek in the backlog: %w", err)
	}
	from, err := strconv.ParseInt(mid.From, 10, 64)
	if err != nil || from < 199 {
		return fmt.Errorf("seek to 150 from checkpoint %q, want one past 200", mid.From)
	}
	if n, want := c.Report().Applied, 300+from-149; n != want {
		return fmt.Errorf("applied %d after a seek from %d to 149, want 300 + %d re-applied", n, from, from-149)
	}
	applied := c.Report().Applied
	before := rows(t, c.Store(), "s")
	if cp := checkpointOf(t, c, "s/0"); cp != "299" {
		return fmt.Errorf("checkpoint %s after the backlog, want 299", cp)
	}
	res, err := seekNow(t, c, actors.Seek{Unit: "s/0", To: "200", By: "ops", Reason: "bad deploy", ID: 7})
	if err != nil {
		return err
	}
	if res.From != "299" || res.Position != "199" || res.Token == 0 || res.Node == "" {
		return fmt.Errorf("seek back 100: %+v, want from 299 to 199 under a token", res)
	}
	if err := settle(c); err != nil {
		return fmt.Errorf("after the seek back 100: %w", err)
	}
	if n := c.Report().Applied - applied; n != 100 {
		return fmt.Errorf("a seek back 100 positions applied %d messages again, want exactly 100", n)
	}
	after := rows(t, c.Store(), "s")
	if len(after) != len(before) {
		return fmt.Errorf("records table: %d rows before the seek, %d after", len(before), len(after))
	}
	for k, r := range before {
		if a := after[k]; string(a.Doc) != string(r.Doc) || a.Position != r.Position || !a.UpdatedAt.Equal(r.UpdatedAt) {
			return fmt.Errorf("record %s rewritten by the seek: %s at %s (%v), was %s at %s (%v)", k, a.Doc, a.Position, a.UpdatedAt, r.Doc, r.Position, r.UpdatedAt)
		}
	}
	tree := must(c.Tree(res.Node))
	ls := tree.Sources[0].Units[0].LastSeek
	if ls == nil || ls.To != "200" || ls.Position != "199" || ls.From != "299" || ls.By != "ops" || ls.Reason != "bad deploy" || ls.ID != 7 {
		return fmt.Errorf("tree's last_seek %+v", ls)
	}
	return nil
}

// Issue 13 item 2. A poison message that fails its handler every time
// blocks its unit (batch size 1: it fails alone); seek --after its
// position skips exactly it: every other message is applied once, it never
// is, and the ledger counts it skipped, not lost.
func edgeSeekPastPoison(t *testing.T) error {
	c := edgeCluster(t, testkit.Config{Seed: 42, Nodes: 1})
	var mu sync.Mutex
	applied := map[string]int{}
	h := func(_ context.Context, _ persistence.Tx, b actors.Batch) error {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range b.Messages {
			if strings.Contains(string(m.Value), "poison") {
				return errors.New("poison: cannot apply")
			}
		}
		for _, m := range b.Messages {
			applied[m.Position]++
		}
		return nil
	}
	must(c.AddStream(actors.SourceSpec{Name: "s", BatchSize: 1, Handler: h}, 1))
	mustStart(t, c)
	msgs := upserts(10, "m")
	msgs[5] = brokers.Message{Value: []byte(`{"id":"poison"}`)}
	must(c.Publish("s", "0", msgs...))
	c.Run(3 * time.Second)
	if cp := checkpointOf(t, c, "s/0"); cp != "4" {
		return fmt.Errorf("checkpoint %s with the poison message at 5, want 4", cp)
	}
	res, err := seekNow(t, c, actors.Seek{Unit: "s/0", To: "after:5", By: "ops", Reason: "poison"})
	if err != nil {
		return err
	}
	if res.Position != "5" {
		return fmt.Errorf("seek after:5 wrote %s, want 5", res.Position)
	}
	if err := settle(c); err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	for i := range 10 {
		p, want := fmt.Sprint(i), 1
		if i == 5 {
			want = 0
		}
		if applied[p] != want {
			return fmt.Errorf("position %s applied %d times, want %d", p, applied[p], want)
		}
	}
	if n := c.Report().Applied; n != 9 {
		return fmt.Errorf("applied %d, want 9", n)
	}
	return nil
}

// A seek the unit cannot carry out changes nothing and says why: a queue,
// a bad target, a position beyond the partition's end (refused by the
// broker before anything is written), a unit this cluster does not have.
func TestSeekRefusals(t *testing.T) {
	c := edgeCluster(t, testkit.Config{Seed: 43, Nodes: 1})
	must(c.AddStream(actors.SourceSpec{Name: "s", KeyField: "id", BatchSize: 10}, 1))
	must(c.AddQueue(actors.SourceSpec{Name: "q", KeyField: "id", BatchSize: 10}, 5*time.Second))
	mustStart(t, c)
	must(c.Publish("s", "0", upserts(20, "a")...))
	if err := settle(c); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		unit, to string
		want     error
		says     string
	}{
		{"s/0", "after:500", brokers.ErrBadSeek, "its end is 20"},
		{"s/0", "yesterday", brokers.ErrBadSeek, "RFC 3339"},
		{"q/slot-0", "earliest", brokers.ErrBadSeek, "queue"},
	} {
		_, err := seekNow(t, c, actors.Seek{Unit: tt.unit, To: tt.to})
		if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("seek %s to %s: %v, want %v saying %q", tt.unit, tt.to, err, tt.want, tt.says)
		}
	}
	if cp := checkpointOf(t, c, "s/0"); cp != "19" {
		t.Fatalf("checkpoint %s after refused seeks, want 19", cp)
	}
	if err := settle(c); err != nil {
		t.Fatal(err)
	}
	if _, err := seekNow(t, c, actors.Seek{Unit: "s/9", To: "earliest"}); err == nil {
		t.Fatal("a seek of a unit no node holds succeeded")
	}
}
