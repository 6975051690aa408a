package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/clock"
	"github.com/drover-dev/drover/persistence"
)

// Harness tells Run how to open the store under test and which optional
// capabilities it has. A definition that needs a capability the harness
// does not offer is not run for that store (it is not skipped: it does not
// apply).
type Harness struct {
	// Open opens a fresh, empty store for one test and arranges for it to
	// be closed with t.Cleanup. When Clock is set, clk is a *Clock the store
	// must judge lease expiry and stamp its writes by; otherwise clk is nil
	// and the store keeps its own time (PostgreSQL's now()).
	Open func(t *testing.T, clk clock.Clock) persistence.Store

	// Clock: the store takes an injected clock. Without it, tests that need
	// a lease to expire use a short TTL and wait for the condition on the
	// wall clock, with a deadline.
	Clock bool

	// Schema, when set, runs the migration definitions (SQL stores).
	Schema *Schema

	// FailMidTx, when set, arranges for the next Apply on s to fail inside
	// its transaction after it has written part of the batch, as a dropped
	// connection or a full disk would.
	FailMidTx func(t *testing.T, s persistence.Store)

	// Refuse, when set, makes s refuse every document written to table
	// that has a top-level member "bad", as the CHECK constraint
	// (doc->>'bad' IS NULL) would: the write fails with an error matching
	// persistence.ErrPermanent. The table may already hold rows.
	Refuse func(t *testing.T, s persistence.Store, table string)
}

// Schema is the migration capability of a SQL store.
type Schema struct {
	// Version is the schema version this build migrates to.
	Version int
	// Reopen opens another Store on the database s uses, running the
	// migrations again. The suite closes what it returns.
	Reopen func(t *testing.T, s persistence.Store) (persistence.Store, error)
	// Current reads the schema version recorded in the database of s.
	Current func(t *testing.T, s persistence.Store) int
	// Stamp records v as the schema version of the database of s, as a
	// newer drover would have.
	Stamp func(t *testing.T, s persistence.Store, v int)
}

// startTime is the time the manual Clock reads when a test begins.
func startTime() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) }

// definition is one named conformance test.
type definition struct {
	name string
	// needs says whether the harness can run it.
	needs func(h Harness) bool
	run   func(e *env)
}

func always(Harness) bool        { return true }
func needsClock(h Harness) bool  { return h.Clock }
func needsSchema(h Harness) bool { return h.Schema != nil }
func needsMidTx(h Harness) bool  { return h.FailMidTx != nil }

// Run runs every definition that applies to h as a subtest of t.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.Open == nil {
		t.Fatal("storetest: Harness.Open is nil")
	}
	for _, d := range definitions() {
		if !d.needs(h) {
			continue
		}
		t.Run(d.name, func(t *testing.T) {
			d.run(newEnv(t, h))
		})
	}
}

// env is one test's store and helpers.
type env struct {
	t   *testing.T
	h   Harness
	s   persistence.Store
	clk *Clock // nil when the store keeps its own time
	ctx context.Context
}

func newEnv(t *testing.T, h Harness) *env {
	e := &env{t: t, h: h, ctx: t.Context()}
	var clk clock.Clock
	if h.Clock {
		e.clk = NewClock(startTime())
		clk = e.clk
	}
	e.s = h.Open(t, clk)
	if e.s == nil {
		t.Fatal("storetest: Open returned nil")
	}
	return e
}

// longTTL never expires within a test.
const longTTL = time.Hour

// shortTTL is used where a lease must expire: with a manual clock the test
// advances past it; without, it waits for it on the wall clock.
func (e *env) shortTTL() time.Duration {
	if e.clk != nil {
		return 10 * time.Second
	}
	return time.Second
}

// now is the store's time as far as the test knows it.
func (e *env) now() time.Time {
	if e.clk != nil {
		return e.clk.Now()
	}
	return time.Now()
}

// advance moves a manual clock forward. Without one it does nothing: tests
// that need time to pass on such stores use waitFor.
func (e *env) advance(d time.Duration) {
	if e.clk != nil {
		e.clk.Advance(d)
	}
}

// waitFor makes cond true: with a manual clock it advances by d and cond
// must then hold at once; without, it polls cond until it holds or a
// deadline of d plus 10 s passes.
func (e *env) waitFor(d time.Duration, what string, cond func() bool) {
	e.t.Helper()
	if e.clk != nil {
		e.clk.Advance(d)
		if !cond() {
			e.t.Fatalf("%s: not so after advancing the clock by %s", what, d)
		}
		return
	}
	deadline := time.Now().Add(d + 10*time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: not so within %s", what, d+10*time.Second)
		}
		select {
		case <-tick.C:
		case <-e.ctx.Done():
			e.t.Fatalf("%s: %v", what, e.ctx.Err())
		}
	}
}

func (e *env) acquire(unit, owner string, live ...string) persistence.Lease {
	e.t.Helper()
	return e.acquireTTL(unit, owner, longTTL, live...)
}

func (e *env) acquireTTL(unit, owner string, ttl time.Duration, live ...string) persistence.Lease {
	e.t.Helper()
	if live == nil {
		live = []string{owner}
	}
	l, err := e.s.Acquire(e.ctx, persistence.AcquireRequest{Unit: unit, Owner: owner, TTL: ttl, Live: live})
	if err != nil {
		e.t.Fatalf("acquire %s as %s: %v", unit, owner, err)
	}
	return l
}

func (e *env) apply(b *persistence.Batch) persistence.Applied {
	e.t.Helper()
	a, err := e.s.Apply(e.ctx, b)
	if err != nil {
		e.t.Fatalf("apply to %s with token %d: %v", b.Unit, b.Lease.Token, err)
	}
	return a
}

func (e *env) leases() map[string]persistence.Lease {
	e.t.Helper()
	ls, err := e.s.List(e.ctx)
	if err != nil {
		e.t.Fatalf("list leases: %v", err)
	}
	out := make(map[string]persistence.Lease, len(ls))
	for _, l := range ls {
		out[l.Unit] = l
	}
	return out
}

func (e *env) records(table string) map[string]persistence.Record {
	e.t.Helper()
	rs, err := e.s.Records(e.ctx, table, "", 0)
	if err != nil {
		e.t.Fatalf("records of %s: %v", table, err)
	}
	out := make(map[string]persistence.Record, len(rs))
	for _, r := range rs {
		out[r.Key] = r
	}
	return out
}

// wantDocs checks that table holds exactly the given documents, compared
// as JSON values.
func (e *env) wantDocs(table string, want map[string]string) {
	e.t.Helper()
	got := e.records(table)
	for k, w := range want {
		r, ok := got[k]
		if !ok {
			e.t.Errorf("%s: key %q missing, want %s", table, k, w)
			continue
		}
		if !sameJSON(r.Doc, []byte(w)) {
			e.t.Errorf("%s[%q] = %s, want %s", table, k, r.Doc, w)
		}
	}
	for k, r := range got {
		if _, ok := want[k]; !ok {
			e.t.Errorf("%s: unexpected key %q = %s", table, k, r.Doc)
		}
	}
}

func (e *env) checkpoint(unit string) (persistence.Checkpoint, bool) {
	e.t.Helper()
	c, err := e.s.Checkpoint(e.ctx, unit)
	if errors.Is(err, persistence.ErrNotFound) {
		return c, false
	}
	if err != nil {
		e.t.Fatalf("checkpoint %s: %v", unit, err)
	}
	return c, true
}

func (e *env) deadLetters(f persistence.DeadLetterFilter) []persistence.DeadLetter {
	e.t.Helper()
	ds, err := e.s.DeadLetters(e.ctx, f)
	if err != nil {
		e.t.Fatalf("dead letters %+v: %v", f, err)
	}
	return ds
}

// wantTime checks a time the store stamped: exactly want with a manual
// clock; otherwise within a minute of the wall clock's want.
func (e *env) wantTime(what string, got, want time.Time) {
	e.t.Helper()
	if e.clk != nil {
		if !got.Equal(want) {
			e.t.Errorf("%s = %s, want %s", what, got, want)
		}
		return
	}
	if d := got.Sub(want); d < -time.Minute || d > time.Minute {
		e.t.Errorf("%s = %s, want about %s", what, got, want)
	}
}

// sameJSON compares two documents as JSON values.
func sameJSON(a, b []byte) bool {
	var va, vb any
	da := json.NewDecoder(bytes.NewReader(a))
	db := json.NewDecoder(bytes.NewReader(b))
	da.UseNumber()
	db.UseNumber()
	if da.Decode(&va) != nil || db.Decode(&vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}

func upsert(key, doc, pos string) persistence.Op {
	return persistence.Op{Kind: persistence.OpUpsert, Key: key, Doc: []byte(doc), Position: pos}
}

func del(key, pos string) persistence.Op {
	return persistence.Op{Kind: persistence.OpDelete, Key: key, Position: pos}
}

func dead(pos, reason string) persistence.Op {
	return persistence.Op{Kind: persistence.OpDeadLetter, Position: pos, MsgKey: "k" + pos, Payload: []byte("payload " + pos), Reason: reason}
}

func msg(id string) persistence.Op {
	return persistence.Op{Kind: persistence.OpMessage, Position: id, MessageID: id, Payload: []byte(`{"id":"` + id + `"}`)}
}

func withID(op persistence.Op, id string) persistence.Op {
	op.MessageID = id
	return op
}
