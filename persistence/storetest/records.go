package storetest

import (
	"fmt"
	"time"

	"github.com/drover-dev/drover/persistence"
)

func (e *env) batch(l persistence.Lease, ops ...persistence.Op) *persistence.Batch {
	return &persistence.Batch{Source: "orders", Unit: l.Unit, Lease: l, Table: "orders", Ops: ops}
}

func testUpsertDelete(e *env) {
	l := e.acquire("orders/0", "node-1")
	e.apply(e.batch(l, upsert("a", `{"v":1}`, "1"), upsert("b", `{"v":1}`, "2")))
	a := e.apply(e.batch(l, upsert("a", `{"v":2}`, "3"), del("b", "4"), del("never", "5")))
	if a.Upserted != 1 || a.Deleted != 2 {
		e.t.Errorf("applied = %+v, want 1 upserted and 2 deleted (present or not)", a)
	}
	e.wantDocs("orders", map[string]string{"a": `{"v":2}`})
	if r := e.records("orders")["a"]; r.Position != "3" {
		e.t.Errorf("position of a = %q, want 3", r.Position)
	}
	// A deleted key can come back.
	e.apply(e.batch(l, upsert("b", `{"v":3}`, "6")))
	e.wantDocs("orders", map[string]string{"a": `{"v":2}`, "b": `{"v":3}`})
}

func testLastOpWins(e *env) {
	l := e.acquire("orders/0", "node-1")
	e.apply(e.batch(l, upsert("kept-deleted", `{"v":0}`, "1")))
	a := e.apply(e.batch(l,
		upsert("put-del", `{"v":1}`, "2"), del("put-del", "3"),
		del("del-put", "4"), upsert("del-put", `{"v":2}`, "5"),
		upsert("put-put", `{"v":3}`, "6"), upsert("put-put", `{"v":4}`, "7"),
		upsert("kept-deleted", `{"v":5}`, "8"), del("kept-deleted", "9"),
	))
	if a.Upserted != 2 || a.Deleted != 2 {
		e.t.Errorf("applied = %+v, want 2 upserted and 2 deleted after folding", a)
	}
	e.wantDocs("orders", map[string]string{"del-put": `{"v":2}`, "put-put": `{"v":4}`})
	if r := e.records("orders")["put-put"]; r.Position != "7" {
		e.t.Errorf("position of put-put = %q, want 7 (the last op's)", r.Position)
	}
}

func testUnchanged(e *env) {
	l := e.acquire("orders/0", "node-1")
	e.apply(e.batch(l, upsert("a", `{"id":"a","n":1,"tags":["x","y"],"nested":{"p":1.5,"q":null}}`, "1")))
	first := e.records("orders")["a"]
	e.advance(time.Minute)
	same := ` { "nested" : {"q":null, "p":1.50}, "tags":["x","y"], "n":1.0, "id":"a" } `
	a := e.apply(e.batch(l, upsert("a", same, "2")))
	if a.Unchanged != 1 || a.Upserted != 0 {
		e.t.Errorf("applied = %+v, want 1 unchanged", a)
	}
	again := e.records("orders")["a"]
	if !again.UpdatedAt.Equal(first.UpdatedAt) || again.Position != first.Position {
		e.t.Errorf("unchanged doc rewritten: updated %s at %s, was %s at %s", again.Position, again.UpdatedAt, first.Position, first.UpdatedAt)
	}
	e.advance(time.Minute)
	at := e.now()
	a = e.apply(e.batch(l, upsert("a", `{"id":"a","n":2,"tags":["x","y"],"nested":{"p":1.5,"q":null}}`, "3")))
	if a.Upserted != 1 || a.Unchanged != 0 {
		e.t.Errorf("applied = %+v, want 1 upserted", a)
	}
	changed := e.records("orders")["a"]
	if changed.Position != "3" || changed.UpdatedAt.Before(first.UpdatedAt) {
		e.t.Errorf("changed doc: position %s at %s, want 3 at or after %s", changed.Position, changed.UpdatedAt, first.UpdatedAt)
	}
	e.wantTime("UpdatedAt of the changed doc", changed.UpdatedAt, at)
	// Array order matters.
	a = e.apply(e.batch(l, upsert("a", `{"id":"a","n":2,"tags":["y","x"],"nested":{"p":1.5,"q":null}}`, "4")))
	if a.Upserted != 1 {
		e.t.Errorf("reordered array: applied = %+v, want 1 upserted", a)
	}
}

func testPaging(e *env) {
	l := e.acquire("orders/0", "node-1")
	var ops []persistence.Op
	for i := 9; i >= 0; i-- {
		ops = append(ops, upsert(fmt.Sprintf("k%02d", i), fmt.Sprintf(`{"i":%d}`, i), fmt.Sprint(10-i)))
	}
	e.apply(e.batch(l, ops...))
	var got []string
	after := ""
	for pages := 0; ; pages++ {
		if pages > 10 {
			e.t.Fatal("paging does not end")
		}
		rs, err := e.s.Records(e.ctx, "orders", after, 3)
		if err != nil {
			e.t.Fatal(err)
		}
		if len(rs) > 3 {
			e.t.Fatalf("page of %d rows, limit 3", len(rs))
		}
		if len(rs) == 0 {
			break
		}
		for _, r := range rs {
			got = append(got, r.Key)
		}
		after = rs[len(rs)-1].Key
	}
	want := []string{"k00", "k01", "k02", "k03", "k04", "k05", "k06", "k07", "k08", "k09"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		e.t.Errorf("paged keys %v, want %v", got, want)
	}
	if rs, err := e.s.Records(e.ctx, "never_written", "", 10); err != nil || len(rs) != 0 {
		e.t.Errorf("a table never written: %v, %v; want empty", rs, err)
	}
	if _, err := e.s.Records(e.ctx, "drover_leases", "", 10); err == nil {
		e.t.Error("records of drover_leases: no error")
	}
}

func (e *env) cp(l persistence.Lease, pos string, finished bool) {
	e.t.Helper()
	e.apply(&persistence.Batch{Source: "orders", Unit: l.Unit, Lease: l, Checkpoint: pos, Finished: finished})
}

func (e *env) wantCheckpoint(unit, pos string, finished bool) persistence.Checkpoint {
	e.t.Helper()
	c, ok := e.checkpoint(unit)
	if !ok || c.Position != pos || c.Finished != finished {
		e.t.Errorf("checkpoint of %s = %+v (found %v), want %q finished=%v", unit, c, ok, pos, finished)
	}
	return c
}

func testCheckpointForward(e *env) {
	if _, ok := e.checkpoint("orders/0"); ok {
		e.t.Fatal("a checkpoint before any apply")
	}
	l := e.acquire("orders/0", "node-1")
	e.cp(l, "10", false)
	first := e.wantCheckpoint("orders/0", "10", false)
	e.advance(time.Second)
	e.cp(l, "9", false) // "9" < "10" as numbers, though not as text
	if c := e.wantCheckpoint("orders/0", "10", false); !c.UpdatedAt.Equal(first.UpdatedAt) {
		e.t.Errorf("a checkpoint that did not move was rewritten")
	}
	e.advance(time.Second)
	e.cp(l, "10", false) // the same position again: not rewritten either
	if c := e.wantCheckpoint("orders/0", "10", false); !c.UpdatedAt.Equal(first.UpdatedAt) {
		e.t.Errorf("a checkpoint written again at its own position was rewritten")
	}
	l2 := e.acquire("orders/0", "node-2", "node-2")
	e.cp(l2, "123456789012345678901234567890", false)
	c := e.wantCheckpoint("orders/0", "123456789012345678901234567890", false)
	if c.Token != l2.Token {
		e.t.Errorf("checkpoint token = %d, want the writer's %d", c.Token, l2.Token)
	}
	e.cp(l2, "99999999999999999999", false)
	e.wantCheckpoint("orders/0", "123456789012345678901234567890", false)
}

// Sub-positions (a user record inside a KPL aggregate, "<n>/<i>") order by
// the number, then before the plain number (the whole record), then by
// the index's value.
func testCheckpointSubPositions(e *env) {
	l := e.acquire("shards/0", "node-1")
	for _, step := range []struct{ pos, want string }{
		{"5/0", "5/0"},
		{"5/2", "5/2"},
		{"5/10", "5/10"}, // by value, not as text
		{"5/9", "5/10"},
		{"4", "5/10"},
		{"5", "5"}, // the whole record is after each of its user records
		{"5/11", "5"},
		{"6/0", "6/0"},
		{"6", "6"},
		{"7", "7"},
	} {
		e.cp(l, step.pos, false)
		e.wantCheckpoint("shards/0", step.want, false)
	}
}

func testCheckpointFinished(e *env) {
	l := e.acquire("shards/0", "node-1")
	e.cp(l, "5", false)
	e.cp(l, "5", true) // the same position, now finished
	e.wantCheckpoint("shards/0", "5", true)
	e.cp(l, "4", false)
	e.wantCheckpoint("shards/0", "5", true)

	// A shard closed before anything was read: Finished alone.
	l = e.acquire("shards/1", "node-1")
	e.cp(l, "", true)
	e.wantCheckpoint("shards/1", "", true)
}

func testCheckpointsList(e *env) {
	for _, u := range []string{"orders/2", "orders/0", "orders/10", "jobs/0"} {
		l := e.acquire(u, "node-1")
		src := "orders"
		if u == "jobs/0" {
			src = "jobs"
		}
		e.apply(&persistence.Batch{Source: src, Unit: u, Lease: l, Checkpoint: "1"})
	}
	cs, err := e.s.Checkpoints(e.ctx, "orders")
	if err != nil {
		e.t.Fatal(err)
	}
	var units []string
	for _, c := range cs {
		units = append(units, c.Unit)
	}
	if fmt.Sprint(units) != "[orders/0 orders/10 orders/2]" {
		e.t.Errorf("checkpoints of orders: %v, want [orders/0 orders/10 orders/2]", units)
	}
	if cs, err := e.s.Checkpoints(e.ctx, "none"); err != nil || len(cs) != 0 {
		e.t.Errorf("checkpoints of an unknown source: %v, %v", cs, err)
	}
}
