package actors

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"testing"

	"github.com/drover-dev/drover/actors/decode"
	"github.com/drover-dev/drover/actors/quality"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/persistence"
)

// msgs makes stream messages at the given positions, each a JSON object
// {"id":<position>} (16 bytes of document and key for a two-digit one).
func msgs(positions ...string) []brokers.Message {
	out := make([]brokers.Message, len(positions))
	for i, p := range positions {
		out[i] = brokers.Message{Position: p, Value: []byte(`{"id":"` + p + `"}`)}
	}
	return out
}

func queueMsgs(ids ...string) []brokers.Message {
	out := make([]brokers.Message, len(ids))
	for i, id := range ids {
		out[i] = brokers.Message{Position: id, ID: id, Value: []byte(`{"id":"` + id + `"}`)}
	}
	return out
}

// batchShape is what a test checks of a batch.
type batchShape struct {
	positions  []string
	checkpoint string
	finished   bool
}

func shapeOf(b *persistence.Batch) batchShape {
	s := batchShape{checkpoint: b.Checkpoint, finished: b.Finished}
	for _, op := range b.Ops {
		s.positions = append(s.positions, op.Position)
	}
	return s
}

func TestPrepareFetch(t *testing.T) {
	lease := persistence.Lease{Unit: "s/0", Owner: "n1", Token: 7}
	stream := fetchBatching{source: "s", unit: "s/0", table: "t", lease: lease, maxBytes: 1 << 20,
		decoder: decode.Config{KeyField: "id"}}
	queue := stream
	queue.queue = true
	small := stream
	small.maxBytes = 40 // two ops of about 20 bytes
	after := stream
	after.position = "11"

	cases := []struct {
		name    string
		f       fetchBatching
		res     brokers.Result
		nothing bool // prepareFetch returns nil
		want    []batchShape
	}{
		{name: "empty fetch", f: stream, res: brokers.Result{}, nothing: true},
		{name: "one batch, checkpoint of the last", f: stream, res: brokers.Result{Messages: msgs("10", "11", "12")},
			want: []batchShape{{positions: []string{"10", "11", "12"}, checkpoint: "12"}}},
		{name: "re-reads at or below the position dropped", f: after, res: brokers.Result{Messages: msgs("10", "11", "12")},
			want: []batchShape{{positions: []string{"12"}, checkpoint: "12"}}},
		{name: "only re-reads", f: after, res: brokers.Result{Messages: msgs("10", "11")}, nothing: true},
		{name: "end with nothing new finishes at the position", f: after, res: brokers.Result{Messages: msgs("11"), End: true},
			want: []batchShape{{checkpoint: "11", finished: true}}},
		{name: "end finishes the last batch", f: stream, res: brokers.Result{Messages: msgs("10", "11"), End: true},
			want: []batchShape{{positions: []string{"10", "11"}, checkpoint: "11", finished: true}}},
		{name: "cut at batch_bytes, each with its checkpoint", f: small, res: brokers.Result{Messages: msgs("10", "11", "12", "13", "14"), End: true},
			want: []batchShape{
				{positions: []string{"10", "11"}, checkpoint: "11"},
				{positions: []string{"12", "13"}, checkpoint: "13"},
				{positions: []string{"14"}, checkpoint: "14", finished: true},
			}},
		{name: "an op larger than batch_bytes is a batch of its own", f: small,
			res: brokers.Result{Messages: []brokers.Message{msgs("10")[0], {Position: "11", Value: []byte(`{"id":"11","pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`)}, msgs("12")[0]}},
			want: []batchShape{
				{positions: []string{"10"}, checkpoint: "10"},
				{positions: []string{"11"}, checkpoint: "11"},
				{positions: []string{"12"}, checkpoint: "12"},
			}},
		{name: "queue: no checkpoint, nothing dropped, end ignored", f: queue, res: brokers.Result{Messages: queueMsgs("b", "a"), End: true},
			want: []batchShape{{positions: []string{"b", "a"}}}},
		{name: "queue: empty receive", f: queue, res: brokers.Result{}, nothing: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pb := prepareFetch(c.f, c.res)
			if c.nothing {
				if pb != nil {
					t.Fatalf("got a pending batch %+v, want nil", shapeOf(pb.batch))
				}
				return
			}
			if pb == nil {
				t.Fatal("got nil, want batches")
			}
			var got []batchShape
			for _, b := range append([]*persistence.Batch{pb.batch}, pb.rest...) {
				got = append(got, shapeOf(b))
				if b.Source != "s" || b.Unit != "s/0" || b.Lease != lease || b.Table != "t" || b.Dedupe != c.f.queue || b.Handle != nil {
					t.Errorf("batch %+v: source %q unit %q lease %+v table %q dedupe %v handle %v", shapeOf(b), b.Source, b.Unit, b.Lease, b.Table, b.Dedupe, b.Handle != nil)
				}
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("batches\n got %+v\nwant %+v", got, c.want)
			}
			if len(pb.msgs) != len(c.res.Messages) {
				t.Errorf("msgs: %d, want all %d fetched", len(pb.msgs), len(c.res.Messages))
			}
			for _, s := range got {
				for _, p := range s.positions {
					if m, ok := pb.message(p); !ok || m.Position != p {
						t.Errorf("message(%s) = %q, %v: want the fetched message", p, m.Position, ok)
					}
				}
			}
		})
	}
}

func TestPrepareFetchDecodes(t *testing.T) {
	f := fetchBatching{source: "s", unit: "s/0", table: "t", maxBytes: 1 << 20, decoder: decode.Config{KeyField: "id"}}
	res := brokers.Result{Messages: []brokers.Message{
		{Position: "1", Value: []byte(`{"id":"a"}`)},
		{Position: "2", Value: []byte(`not json`)},
	}}
	pb := prepareFetch(f, res)
	if k := pb.batch.Ops[0].Kind; k != persistence.OpUpsert {
		t.Errorf("a JSON object: op %v, want an upsert", k)
	}
	if k := pb.batch.Ops[1].Kind; k != persistence.OpDeadLetter {
		t.Errorf("not JSON: op %v, want a dead letter", k)
	}
}

func TestPrepareFetchWithHandler(t *testing.T) {
	var built []string
	f := fetchBatching{source: "s", unit: "s/0", table: "t", maxBytes: 30, decoder: decode.Config{KeyField: "id"},
		handle: func(b *persistence.Batch, byPos map[string]brokers.Message) func(context.Context, persistence.Tx, []persistence.Op) error {
			built = append(built, opRange(b.Ops))
			if len(byPos) != 3 {
				t.Errorf("handle got %d messages by position, want 3", len(byPos))
			}
			return func(context.Context, persistence.Tx, []persistence.Op) error { return nil }
		}}
	pb := prepareFetch(f, brokers.Result{Messages: msgs("10", "11", "12")})
	for _, b := range append([]*persistence.Batch{pb.batch}, pb.rest...) {
		if b.Table != "" || b.Handle == nil {
			t.Errorf("batch %s: table %q, handle %v; want no table and a handle", opRange(b.Ops), b.Table, b.Handle != nil)
		}
		for _, op := range b.Ops {
			if op.Kind != persistence.OpMessage {
				t.Errorf("op %s: kind %v, want the raw message", op.Position, op.Kind)
			}
		}
	}
	if want := []string{"10..11", "12..12"}; !reflect.DeepEqual(built, want) {
		t.Errorf("handles built for %v, want %v", built, want)
	}
}

func TestTallyApply(t *testing.T) {
	rec := func(pos string) persistence.Op {
		return persistence.Op{Kind: persistence.OpUpsert, Position: pos, Key: pos, Doc: []byte(`{}`)}
	}
	dead := func(pos string) persistence.Op {
		return persistence.Op{Kind: persistence.OpDeadLetter, Position: pos, Reason: "r"}
	}
	withID := func(op persistence.Op, id string) persistence.Op { op.MessageID = id; return op }

	cases := []struct {
		name       string
		ops        []persistence.Op
		duplicates []string
		late       map[string]bool
		want       applyTally // sample compared by its row count
		rows       int64
	}{
		{name: "nothing", want: applyTally{}},
		{name: "records", ops: []persistence.Op{rec("1"), rec("2")}, want: applyTally{applied: 2}, rows: 2},
		{name: "a rejection", ops: []persistence.Op{rec("1"), dead("2")}, want: applyTally{applied: 1, deadLettered: 1, rejected: 1}, rows: 2},
		{name: "a late dead letter is no rejection", ops: []persistence.Op{dead("1"), dead("2")}, late: map[string]bool{"2": true},
			want: applyTally{deadLettered: 2, rejected: 1}, rows: 2},
		{name: "duplicates not counted", ops: []persistence.Op{withID(rec("a"), "a"), withID(dead("b"), "b"), withID(rec("c"), "c")},
			duplicates: []string{"b", "c", "c"}, want: applyTally{applied: 1, duplicates: 2}, rows: 1},
		{name: "all duplicates: no sample", ops: []persistence.Op{withID(rec("a"), "a")}, duplicates: []string{"a"},
			want: applyTally{duplicates: 1}},
		{name: "a duplicate id without a message id on the op", ops: []persistence.Op{rec("a")}, duplicates: []string{""},
			want: applyTally{applied: 1, duplicates: 1}, rows: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := tallyApply(c.ops, c.duplicates, c.late, quality.Schema{})
			var rows int64
			if got.sample != nil {
				rows = got.sample.Rows()
			}
			if (got.sample == nil) != (c.rows == 0) || rows != c.rows {
				t.Errorf("sample: %v with %d rows, want %d rows", got.sample != nil, rows, c.rows)
			}
			got.sample = nil
			if got != c.want {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestCommitted(t *testing.T) {
	cases := []struct {
		cp   persistence.Checkpoint
		b    persistence.Batch
		want bool
	}{
		{persistence.Checkpoint{Position: "10"}, persistence.Batch{Checkpoint: "10"}, true},
		{persistence.Checkpoint{Position: "11"}, persistence.Batch{Checkpoint: "10"}, true},
		{persistence.Checkpoint{Position: "9"}, persistence.Batch{Checkpoint: "10"}, false},
		{persistence.Checkpoint{Position: "100"}, persistence.Batch{Checkpoint: "99"}, true}, // numeric order
		{persistence.Checkpoint{Position: "10"}, persistence.Batch{Checkpoint: "10", Finished: true}, false},
		{persistence.Checkpoint{Position: "10", Finished: true}, persistence.Batch{Checkpoint: "10", Finished: true}, true},
		{persistence.Checkpoint{}, persistence.Batch{}, true}, // a queue batch: nothing to compare
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%+v/%s,%v", c.cp, c.b.Checkpoint, c.b.Finished), func(t *testing.T) {
			if got := committed(c.cp, &c.b); got != c.want {
				t.Errorf("committed = %v, want %v", got, c.want)
			}
		})
	}
}

func TestBehindWhenFullOrLagging(t *testing.T) {
	n := func(k int) []brokers.Message { return make([]brokers.Message, k) }
	for _, c := range []struct {
		r    brokers.Result
		want bool
	}{
		{brokers.Result{Messages: n(10)}, true},
		{brokers.Result{Messages: n(3), Lag: 5}, true},
		{brokers.Result{Messages: n(3)}, false},
		{brokers.Result{Messages: n(3), Lag: -1}, false}, // unknown
		{brokers.Result{}, false},
		{brokers.Result{Messages: n(10), Lag: 2, End: true}, false},
	} {
		if got := behind(c.r, 10); got != c.want {
			t.Errorf("behind(%d messages, lag %d, end %t) = %t, want %t", len(c.r.Messages), c.r.Lag, c.r.End, got, c.want)
		}
	}
}

// A fetch cut by batch_bytes into many batches reserves room for about
// its ops, not for the rest of the fetch in every batch (which grows as
// the square of the fetch).
func TestPrepareFetchRoomIsLinear(t *testing.T) {
	const n = 200
	res := brokers.Result{}
	for i := range n {
		res.Messages = append(res.Messages, brokers.Message{Position: strconv.Itoa(i + 1), Key: []byte("k"), Value: []byte(`{"id":"` + strconv.Itoa(i) + `"}`)})
	}
	f := fetchBatching{source: "s", unit: "s/0", table: "t", maxBytes: 1, decoder: decode.Config{KeyField: "id"}}
	pb := prepareFetch(f, res)
	all := append([]*persistence.Batch{pb.batch}, pb.rest...)
	if len(all) != n {
		t.Fatalf("%d batches, want one per message (%d)", len(all), n)
	}
	room := 0
	for _, b := range all {
		room += cap(b.Ops)
	}
	if room > 2*n {
		t.Fatalf("the batches reserve room for %d ops in all, want at most %d for %d ops", room, 2*n, n)
	}
}
