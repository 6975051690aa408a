package storetest

import (
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/drover-dev/drover/persistence"
)

func testDedupe(e *env) {
	l := e.acquire("jobs/slot-0", "node-1")
	b := func(ops ...persistence.Op) *persistence.Batch {
		return &persistence.Batch{Source: "jobs", Unit: l.Unit, Lease: l, Table: "jobs", Dedupe: true, Ops: ops}
	}
	a := e.apply(b(withID(upsert("a", `{"v":1}`, "m-1"), "m-1"), withID(upsert("b", `{"v":1}`, "m-2"), "m-2")))
	if a.Upserted != 2 || len(a.Duplicates) != 0 {
		e.t.Fatalf("first batch: %+v", a)
	}
	a = e.apply(b(
		withID(upsert("a", `{"v":2}`, "m-1"), "m-1"), // redelivered
		withID(upsert("c", `{"v":1}`, "m-3"), "m-3"),
		withID(upsert("c", `{"v":2}`, "m-3"), "m-3"), // repeated within the batch
		withID(dead("m-4", "bad"), "m-4"),
		withID(dead("m-2", "bad"), "m-2"), // a dead letter is a duplicate too
		upsert("d", `{"v":1}`, "x"),       // no message id: never a duplicate
	))
	if !slices.Equal(a.Duplicates, []string{"m-1", "m-3", "m-2"}) {
		e.t.Errorf("duplicates = %v, want [m-1 m-3 m-2]", a.Duplicates)
	}
	if a.Upserted != 2 || a.DeadLettered != 1 {
		e.t.Errorf("applied = %+v, want 2 upserted, 1 dead-lettered", a)
	}
	e.wantDocs("jobs", map[string]string{"a": `{"v":1}`, "b": `{"v":1}`, "c": `{"v":1}`, "d": `{"v":1}`})
	// The dead letter's id was recorded too.
	a = e.apply(b(withID(upsert("e", `{}`, "m-4"), "m-4")))
	if !slices.Equal(a.Duplicates, []string{"m-4"}) {
		e.t.Errorf("duplicates = %v, want [m-4]", a.Duplicates)
	}
	// Ids are per source.
	other := &persistence.Batch{Source: "other", Unit: l.Unit, Lease: l, Table: "other", Dedupe: true,
		Ops: []persistence.Op{withID(upsert("a", `{}`, "m-1"), "m-1")}}
	if a := e.apply(other); len(a.Duplicates) != 0 || a.Upserted != 1 {
		e.t.Errorf("same id in another source: %+v, want applied", a)
	}
	// Without Dedupe, ids are neither checked nor recorded.
	plain := b(withID(upsert("a", `{"v":9}`, "m-1"), "m-1"), withID(upsert("f", `{}`, "m-9"), "m-9"))
	plain.Dedupe = false
	if a := e.apply(plain); len(a.Duplicates) != 0 || a.Upserted != 2 {
		e.t.Errorf("without dedupe: %+v, want 2 upserted", a)
	}
	if a := e.apply(b(withID(upsert("f", `{"v":1}`, "m-9"), "m-9"))); len(a.Duplicates) != 0 {
		e.t.Errorf("an id applied without Dedupe was recorded: %+v", a)
	}
}

func testPrune(e *env) {
	l := e.acquire("jobs/slot-0", "node-1")
	apply := func(id string) persistence.Applied {
		return e.apply(&persistence.Batch{Source: "jobs", Unit: l.Unit, Lease: l, Table: "jobs", Dedupe: true,
			Ops: []persistence.Op{withID(upsert(id, `{}`, id), id)}})
	}
	apply("m-1")
	old := e.now()
	e.advance(time.Hour)
	apply("m-2")

	// Nothing is older than an hour before the first id.
	if n, err := e.s.PruneDedupe(e.ctx, old.Add(-time.Hour)); err != nil || n != 0 {
		e.t.Fatalf("prune before everything: %d, %v; want 0", n, err)
	}
	if a := apply("m-1"); len(a.Duplicates) != 1 {
		e.t.Fatalf("m-1 before pruning: %+v, want a duplicate", a)
	}
	var cut time.Time
	var want int64
	if e.clk != nil {
		cut, want = old.Add(30*time.Minute), 1 // m-1 only
	} else {
		cut, want = time.Now().Add(time.Hour), 2 // the wall clock: both
	}
	n, err := e.s.PruneDedupe(e.ctx, cut)
	if err != nil || n != want {
		e.t.Fatalf("prune before %s: %d, %v; want %d", cut, n, err, want)
	}
	if a := apply("m-1"); len(a.Duplicates) != 0 || a.Upserted+a.Unchanged != 1 {
		e.t.Errorf("m-1 after pruning: %+v, want applied again", a)
	}
	if e.clk != nil {
		if a := apply("m-2"); len(a.Duplicates) != 1 {
			e.t.Errorf("m-2, newer than the cut: %+v, want still a duplicate", a)
		}
	}
}

func testDeadLetterRepeat(e *env) {
	l := e.acquire("orders/0", "node-1")
	dl := func(src, pos, reason string) {
		e.apply(&persistence.Batch{Source: src, Unit: l.Unit, Lease: l, Ops: []persistence.Op{dead(pos, reason)}})
	}
	first := e.now()
	dl("orders", "7", "not JSON")
	ds := e.deadLetters(persistence.DeadLetterFilter{})
	if len(ds) != 1 {
		e.t.Fatalf("dead letters = %+v, want 1", ds)
	}
	d := ds[0]
	if d.Source != "orders" || d.Unit != "orders/0" || d.Position != "7" || d.MsgKey != "k7" ||
		string(d.Payload) != "payload 7" || d.Reason != "not JSON" || d.Attempts != 1 || d.Status != persistence.DeadLetterPending {
		e.t.Errorf("dead letter = %+v", d)
	}
	e.wantTime("FirstFailedAt", d.FirstFailedAt, first)
	e.wantTime("LastFailedAt", d.LastFailedAt, first)

	if err := e.s.SetDeadLetterStatus(e.ctx, d.ID, persistence.DeadLetterReplayed); err != nil {
		e.t.Fatal(err)
	}
	e.advance(time.Minute)
	second := e.now()
	dl("orders", "7", "still not JSON") // the replay failed again
	ds = e.deadLetters(persistence.DeadLetterFilter{})
	if len(ds) != 1 {
		e.t.Fatalf("dead letters after a repeat = %+v, want still 1", ds)
	}
	r := ds[0]
	if r.ID != d.ID || r.Attempts != 2 || r.Reason != "still not JSON" || r.Status != persistence.DeadLetterPending {
		e.t.Errorf("repeated dead letter = %+v, want id %d, 2 attempts, the new reason, pending", r, d.ID)
	}
	if !r.FirstFailedAt.Equal(d.FirstFailedAt) {
		e.t.Errorf("FirstFailedAt moved from %s to %s", d.FirstFailedAt, r.FirstFailedAt)
	}
	e.wantTime("LastFailedAt", r.LastFailedAt, second)
	if e.clk != nil && !r.LastFailedAt.After(d.LastFailedAt) {
		e.t.Errorf("LastFailedAt %s not after %s", r.LastFailedAt, d.LastFailedAt)
	}

	dl("orders", "8", "x")   // another position
	dl("payments", "7", "x") // another source
	if ds := e.deadLetters(persistence.DeadLetterFilter{}); len(ds) != 3 {
		e.t.Errorf("dead letters = %d, want 3", len(ds))
	}
}

func testDeadLetterManage(e *env) {
	l := e.acquire("orders/0", "node-1")
	var ops []persistence.Op
	for i := 1; i <= 5; i++ {
		ops = append(ops, dead(strconv.Itoa(i), "reason "+strconv.Itoa(i)))
	}
	e.apply(&persistence.Batch{Source: "orders", Unit: l.Unit, Lease: l, Ops: ops})
	e.apply(&persistence.Batch{Source: "payments", Unit: l.Unit, Lease: l, Ops: []persistence.Op{dead("1", "p")}})

	all := e.deadLetters(persistence.DeadLetterFilter{})
	if len(all) != 6 {
		e.t.Fatalf("dead letters = %d, want 6", len(all))
	}
	for i := 1; i < len(all); i++ {
		if all[i].ID <= all[i-1].ID {
			e.t.Fatalf("dead letters not ordered by id: %d after %d", all[i].ID, all[i-1].ID)
		}
	}
	ids := func(ds []persistence.DeadLetter) []int64 {
		var out []int64
		for _, d := range ds {
			out = append(out, d.ID)
		}
		return out
	}
	orders := e.deadLetters(persistence.DeadLetterFilter{Source: "orders"})
	if !slices.Equal(ids(orders), ids(all[:5])) {
		e.t.Errorf("orders' dead letters %v, want %v", ids(orders), ids(all[:5]))
	}
	page := e.deadLetters(persistence.DeadLetterFilter{Source: "orders", AfterID: all[1].ID, Limit: 2})
	if !slices.Equal(ids(page), ids(all[2:4])) {
		e.t.Errorf("page after %d limit 2: %v, want %v", all[1].ID, ids(page), ids(all[2:4]))
	}

	if err := e.s.SetDeadLetterStatus(e.ctx, all[0].ID, persistence.DeadLetterReplayed); err != nil {
		e.t.Fatal(err)
	}
	if err := e.s.SetDeadLetterStatus(e.ctx, all[1].ID, persistence.DeadLetterResolved); err != nil {
		e.t.Fatal(err)
	}
	d, err := e.s.DeadLetter(e.ctx, all[0].ID)
	if err != nil || d.Status != persistence.DeadLetterReplayed || d.Reason != "reason 1" || string(d.Payload) != "payload 1" {
		e.t.Errorf("show %d = %+v, %v; want replayed with reason 1", all[0].ID, d, err)
	}
	if got := e.deadLetters(persistence.DeadLetterFilter{Status: persistence.DeadLetterResolved}); !slices.Equal(ids(got), []int64{all[1].ID}) {
		e.t.Errorf("resolved = %v, want [%d]", ids(got), all[1].ID)
	}
	if got := e.deadLetters(persistence.DeadLetterFilter{Source: "orders", Status: persistence.DeadLetterPending}); len(got) != 3 {
		e.t.Errorf("pending orders = %v, want 3", ids(got))
	}

	missing := all[len(all)-1].ID + 100
	if _, err := e.s.DeadLetter(e.ctx, missing); !errors.Is(err, persistence.ErrNotFound) {
		e.t.Errorf("show a missing id: err = %v, want ErrNotFound", err)
	}
	if err := e.s.SetDeadLetterStatus(e.ctx, missing, persistence.DeadLetterResolved); !errors.Is(err, persistence.ErrNotFound) {
		e.t.Errorf("mark a missing id: err = %v, want ErrNotFound", err)
	}
	if err := e.s.SetDeadLetterStatus(e.ctx, all[2].ID, "bogus"); err == nil || errors.Is(err, persistence.ErrNotFound) {
		e.t.Errorf("mark with an unknown status: err = %v, want a validation error", err)
	}
}

func testQuality(e *env) {
	t0 := e.now().Truncate(time.Second)
	mk := func(src, node string, i int, status string) persistence.QualityWindow {
		return persistence.QualityWindow{
			Source: src, Node: node,
			WindowStart: t0.Add(time.Duration(i) * 5 * time.Minute),
			WindowEnd:   t0.Add(time.Duration(i+1) * 5 * time.Minute),
			RowsRead:    int64(100 * (i + 1)), RowsFailed: int64(i),
			Fields: map[string]persistence.FieldStats{
				"id":   {Present: 100, Types: map[string]int64{"number": 100}, Type: "number", Declared: "int"},
				"name": {Present: 90, Nulls: 10, NullRate: 0.1, Types: map[string]int64{"string": 90}, Type: "string"},
			},
			Drift:  []persistence.Drift{{Field: "name", Change: "null_rate", From: "0", To: "0.1"}},
			Status: status,
		}
	}
	in := []persistence.QualityWindow{
		mk("orders", "node-1", 0, "ok"), mk("jobs", "node-1", 0, "empty"),
		mk("orders", "node-2", 1, "drift"), mk("orders", "node-1", 2, "degraded"),
	}
	var ids []int64
	for _, w := range in {
		id, err := e.s.WriteQuality(e.ctx, w)
		if err != nil {
			e.t.Fatalf("write quality: %v", err)
		}
		if len(ids) > 0 && id <= ids[len(ids)-1] {
			e.t.Errorf("id %d not after %d", id, ids[len(ids)-1])
		}
		ids = append(ids, id)
	}
	got, err := e.s.QualityWindows(e.ctx, "orders", 0)
	if err != nil {
		e.t.Fatal(err)
	}
	var gotIDs []int64
	for _, w := range got {
		gotIDs = append(gotIDs, w.ID)
	}
	if want := []int64{ids[3], ids[2], ids[0]}; !slices.Equal(gotIDs, want) {
		e.t.Fatalf("orders' windows %v, want newest first %v", gotIDs, want)
	}
	w, want := got[1], in[2]
	if w.Source != want.Source || w.Node != want.Node || !w.WindowStart.Equal(want.WindowStart) ||
		!w.WindowEnd.Equal(want.WindowEnd) || w.RowsRead != want.RowsRead || w.RowsFailed != want.RowsFailed ||
		w.Status != want.Status {
		e.t.Errorf("window = %+v, want %+v", w, want)
	}
	if f := w.Fields["name"]; f.Present != 90 || f.Nulls != 10 || f.NullRate != 0.1 || f.Types["string"] != 90 || f.Type != "string" {
		e.t.Errorf("fields[name] = %+v", f)
	}
	if f := w.Fields["id"]; f.Declared != "int" {
		e.t.Errorf("fields[id] = %+v, want declared int", f)
	}
	if len(w.Drift) != 1 || w.Drift[0] != want.Drift[0] {
		e.t.Errorf("drift = %+v, want %+v", w.Drift, want.Drift)
	}
	if all, err := e.s.QualityWindows(e.ctx, "", 2); err != nil || len(all) != 2 || all[0].ID != ids[3] || all[1].ID != ids[2] {
		e.t.Errorf("all sources, limit 2: %+v, %v", all, err)
	}
	if none, err := e.s.QualityWindows(e.ctx, "nothing", 0); err != nil || len(none) != 0 {
		e.t.Errorf("an unknown source: %v, %v", none, err)
	}
}
