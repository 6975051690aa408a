package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/persistence/sqlite"
)

// TestGroupCheckpointsMoveAsAlone: a group without handlers (one
// transaction, no savepoints) ends as the same batches applied one by
// one: checkpoints moved forward only, a later finished kept, a stored
// checkpoint of another source taken over, a batch of a lost lease
// refused, two batches of one unit in their order, and a reset moved
// back. (A build that fenced a group's batches and moved their
// checkpoints with one statement each, through json_each, passed it and
// was not kept: it was slower, 157-169 against 119-123 us for a one-batch
// group in BenchmarkApplyGroupSmall and no faster for twelve.)
func TestGroupCheckpointsMoveAsAlone(t *testing.T) {
	ctx := context.Background()
	units := []string{"a/0", "a/1", "a/2", "a/3", "a/4", "a/5", "a/6"}
	type step struct {
		unit, source, pos string
		finished, reset   bool
	}
	// the checkpoints stored before the group
	before := []step{{"a/0", "a", "10", false, false}, {"a/1", "a", "10", false, false}, {"a/2", "old", "10", false, false},
		{"a/3", "a", "10", false, false}, {"a/5", "a", "10", false, false}, {"a/6", "a", "10", false, false}}
	group := []step{
		{"a/0", "a", "11", false, false}, // forward
		{"a/1", "a", "9", true, false},   // behind: nothing moves
		{"a/2", "a", "12", false, false}, // another source's stored row: taken over
		{"a/3", "a", "10", true, false},  // the same position, newly finished
		{"a/4", "a", "5", false, false},  // its lease lost: refused
		{"a/5", "a", "20", true, false},  // two of one unit: in order, finished kept
		{"a/5", "a", "21", false, false},
		{"a/6", "a", "4", false, true}, // a reset: back to 4
	}
	// run applies the steps to a fresh store, as one group or one by one,
	// a/4's lease lost to another node first; it answers every source's
	// checkpoints and the batches' errors.
	run := func(t *testing.T, asGroup bool) (string, []string) {
		s, ls, _ := leased(t, units...)
		leases := map[string]persistence.Lease{}
		for _, l := range ls {
			leases[l.Unit] = l
		}
		seq := 0
		batch := func(st step) *persistence.Batch {
			seq++
			return &persistence.Batch{Source: st.source, Unit: st.unit, Lease: leases[st.unit], Table: "orders", Checkpoint: st.pos, Finished: st.finished, Reset: st.reset,
				Ops: []persistence.Op{{Kind: persistence.OpUpsert, Key: st.unit, Position: st.pos, Doc: []byte(`{"seq":` + strconv.Itoa(seq) + `}`)}}}
		}
		for _, st := range before {
			if _, err := s.Apply(ctx, batch(st)); err != nil {
				t.Fatal(err)
			}
		}
		// a/4 loses its lease to another node: its batch is refused
		lost := leases["a/4"]
		if err := s.Release(ctx, lost); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Acquire(ctx, persistence.AcquireRequest{Unit: "a/4", Owner: "node-2", TTL: time.Hour, Live: []string{"node-1", "node-2"}}); err != nil {
			t.Fatal(err)
		}
		bs := make([]*persistence.Batch, len(group))
		for i, st := range group {
			bs[i] = batch(st)
		}
		var errs []string
		if asGroup {
			txs := sqlite.GroupTxs(s)
			for _, r := range s.ApplyGroup(ctx, bs) {
				errs = append(errs, errText(r.Err))
			}
			if got := sqlite.GroupTxs(s) - txs; got != 1 {
				t.Errorf("the group took %d transactions, want 1", got)
			}
		} else {
			for _, b := range bs {
				_, err := s.Apply(ctx, b)
				errs = append(errs, errText(err))
			}
		}
		var out []string
		for _, source := range []string{"a", "old"} {
			cps, err := s.Checkpoints(ctx, source)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range cps {
				out = append(out, fmt.Sprintf("%s %s@%s finished=%v token=%d", c.Source, c.Unit, c.Position, c.Finished, c.Token))
			}
		}
		slices.Sort(out)
		return fmt.Sprint(out), errs
	}
	alone, aloneErrs := run(t, false)
	grouped, groupErrs := run(t, true)
	if grouped != alone {
		t.Errorf("checkpoints after the group:\n%s\nafter the same batches one by one:\n%s", grouped, alone)
	}
	if !slices.Equal(groupErrs, aloneErrs) {
		t.Errorf("the group's errors %q, one by one %q", groupErrs, aloneErrs)
	}
	// and what one by one gives is what the steps say
	want := "[a a/0@11 finished=false token=1 a a/1@10 finished=false token=1 a a/2@12 finished=false token=1 " +
		"a a/3@10 finished=true token=1 a a/5@21 finished=true token=1 a a/6@4 finished=false token=1]"
	if alone != want {
		t.Errorf("one by one:\n%s\nwant\n%s", alone, want)
	}
	if !slices.ContainsFunc(aloneErrs, func(e string) bool { return strings.HasPrefix(e, "lease lost") }) {
		t.Errorf("no batch refused for its lost lease: %q", aloneErrs)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	if errors.Is(err, persistence.ErrLeaseLost) {
		return "lease lost: " + err.Error()
	}
	return err.Error()
}
