package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/persistence/postgres/pgtest"
)

func openTest(t testing.TB, url string, cfg Config) *Store {
	t.Helper()
	s, err := Open(t.Context(), url, cfg)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func acquire(t testing.TB, s *Store, unit, owner string) persistence.Lease {
	t.Helper()
	l, err := s.Acquire(t.Context(), persistence.AcquireRequest{Unit: unit, Owner: owner, TTL: time.Hour, Live: []string{owner}})
	if err != nil {
		t.Fatalf("acquire %s: %v", unit, err)
	}
	return l
}

func upserts(n int, prefix, pos string) []persistence.Op {
	ops := make([]persistence.Op, n)
	for i := range ops {
		k := fmt.Sprintf("%s%06d", prefix, i)
		ops[i] = persistence.Op{Kind: persistence.OpUpsert, Key: k,
			Doc: fmt.Appendf(nil, `{"id":%q,"i":%d,"pos":%q}`, k, i, pos), Position: pos}
	}
	return ops
}

// The checkpoint SQL orders positions exactly as brokers.ComparePositions.
func TestPositionOrderMatchesComparePositions(t *testing.T) {
	s := openTest(t, pg.URL(t), Config{})
	fixed := []string{"", "0", "00", "007", "7", "9", "10", "99999999999999999999",
		"123456789012345678901234567890", "49590338271490256608559692538361571095921575989136588898",
		"a", "A", "abc", "ab", "1a", "-1", "é", "z", "0x10",
		brokers.MarkerBeginning, "@at:2026-03-01T12:00:00Z", "@at:2026-03-01T12:00:00.5Z", "@", "@9", "@é", "@beginning0",
		"7/0", "7/1", "7/01", "7/10", "7/9", "8/0", "6/99", "007/3", "0/0", "7/", "/7", "7/a", "7/0/1",
		"49590338271490256608559692538361571095921575989136588898/0", "49590338271490256608559692538361571095921575989136588898/12"}
	r := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		fixed = append(fixed, randomPosition(r))
	}
	var as, bs []string
	for _, a := range fixed {
		for range 4 {
			as = append(as, a)
			bs = append(bs, fixed[r.IntN(len(fixed))])
		}
	}
	rows, err := s.pool.Query(t.Context(), `SELECT a, b, `+positionAfter("a", "b")+` AS after
		FROM unnest($1::text[], $2::text[]) AS u(a, b)`, as, bs)
	if err != nil {
		t.Fatal(err)
	}
	var a, b string
	var after bool
	n := 0
	if _, err := pgx.ForEachRow(rows, []any{&a, &b, &after}, func() error {
		n++
		if want := brokers.ComparePositions(a, b) > 0; after != want {
			t.Errorf("positionAfter(%q, %q) = %v, ComparePositions says %v", a, b, after, want)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n != len(as) {
		t.Fatalf("compared %d pairs, want %d", n, len(as))
	}
}

func randomPosition(r *rand.Rand) string {
	const digits, other = "0123456789", "0123456789abcXYZ-_@:."
	alphabet := digits
	if r.IntN(4) == 0 {
		alphabet = other
	}
	b := make([]byte, 1+r.IntN(40))
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	if r.IntN(6) == 0 {
		b[0] = '@' // a start marker
	}
	if r.IntN(5) == 0 {
		b = append(b, '/') // a sub-position (when the rest is decimal)
		for range 1 + r.IntN(3) {
			b = append(b, digits[r.IntN(len(digits))])
		}
	}
	return string(b)
}

// No pgx error leaves the package: database errors become *Error, context
// errors still match.
func TestErrorsAreTranslated(t *testing.T) {
	s := openTest(t, pg.URL(t), Config{})
	l := acquire(t, s, "orders/0", "node-1")
	_, err := s.Apply(t.Context(), &persistence.Batch{Source: "orders", Unit: "orders/0", Lease: l, Table: "orders",
		Ops: []persistence.Op{{Kind: persistence.OpUpsert, Key: "a", Doc: []byte(`{"broken":`), Position: "1"}}})
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		t.Fatalf("a pgx error escaped: %v", err)
	}
	var e *Error
	if !errors.As(err, &e) || e.Code != "22P02" {
		t.Fatalf("err = %v, want *Error with SQLSTATE 22P02 (invalid JSON)", err)
	}
	if !strings.HasPrefix(err.Error(), "apply orders/0: ") {
		t.Errorf("err = %q, want it to name the unit once", err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = s.List(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("List with a cancelled context: %v, want context.Canceled", err)
	}
	if errors.As(err, &pe) {
		t.Errorf("a pgx error escaped: %v", err)
	}

	b := &persistence.Batch{Source: "jobs", Unit: "orders/0", Lease: l,
		Ops: []persistence.Op{{Kind: persistence.OpMessage, Position: "1"}}}
	b.Handle = func(ctx context.Context, tx persistence.Tx, ops []persistence.Op) error {
		_, err := tx.Exec(ctx, "SELECT * FROM no_such_table")
		return err
	}
	_, err = s.Apply(t.Context(), b)
	if !errors.As(err, &e) || e.Code != codeUndefinedTable || errors.As(err, &pe) {
		t.Errorf("handler Exec error = %v, want *Error %s and no pgx type", err, codeUndefinedTable)
	}
}

// The Tx given to Handle is dead once Handle returns.
func TestHandlerTxEndsWithHandle(t *testing.T) {
	s := openTest(t, pg.URL(t), Config{})
	l := acquire(t, s, "jobs/slot-0", "node-1")
	var kept persistence.Tx
	b := &persistence.Batch{Source: "jobs", Unit: "jobs/slot-0", Lease: l,
		Ops: []persistence.Op{{Kind: persistence.OpMessage, Position: "1"}},
		Handle: func(ctx context.Context, tx persistence.Tx, ops []persistence.Op) error {
			kept = tx
			if _, ok := tx.Raw().(pgx.Tx); !ok {
				return fmt.Errorf("Raw() = %T, want pgx.Tx", tx.Raw())
			}
			return tx.Put(ctx, "jobs", "a", []byte(`{}`))
		}}
	if _, err := s.Apply(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := kept.Put(ctx, "jobs", "b", []byte(`{}`)); err == nil || !strings.Contains(err.Error(), "already finished") {
		t.Errorf("Put after Handle returned: %v, want already finished", err)
	}
	if _, err := kept.Exec(ctx, "SELECT 1"); err == nil {
		t.Error("Exec after Handle returned: no error")
	}
	if _, _, err := kept.Get(ctx, "jobs", "a"); err == nil {
		t.Error("Get after Handle returned: no error")
	}
}

// A records table dropped behind the store's back is created again.
func TestDroppedTableIsRecreated(t *testing.T) {
	s := openTest(t, pg.URL(t), Config{})
	l := acquire(t, s, "orders/0", "node-1")
	b := &persistence.Batch{Source: "orders", Unit: "orders/0", Lease: l, Table: "orders", Ops: upserts(2, "k", "1")}
	if _, err := s.Apply(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(t.Context(), "DROP TABLE "+s.name("orders")); err != nil {
		t.Fatal(err)
	}
	_, err := s.Apply(t.Context(), b)
	var e *Error
	if !errors.As(err, &e) || e.Code != codeUndefinedTable {
		t.Fatalf("first apply after the drop: %v, want undefined table", err)
	}
	if _, err := s.Apply(t.Context(), b); err != nil {
		t.Fatalf("second apply after the drop: %v", err)
	}
	if rs, err := s.Records(t.Context(), "orders", "", 0); err != nil || len(rs) != 2 {
		t.Fatalf("records: %d, %v; want 2", len(rs), err)
	}
}

func TestOpenRejects(t *testing.T) {
	ctx := t.Context()
	for name, tc := range map[string]struct {
		url  string
		cfg  Config
		want string
	}{
		"bad schema":     {"postgres://u@127.0.0.1:1/db", Config{Schema: "a-b"}, `schema "a-b"`},
		"negative conns": {"postgres://u@127.0.0.1:1/db", Config{MaxConns: -1}, "max conns -1"},
		"bad url":        {"postgres://u:s3cret@host:notaport/db", Config{}, "cannot parse the URL"},
	} {
		_, err := Open(ctx, tc.url, tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", name, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: the error shows the password: %v", name, err)
		}
	}
}

// Openers racing on a fresh database migrate it once.
func TestConcurrentOpenersMigrateOnce(t *testing.T) {
	url := pg.URL(t)
	const n = 6
	var wg sync.WaitGroup
	errs := make([]error, n)
	stores := make([]*Store, n)
	for i := range n {
		wg.Go(func() {
			stores[i], errs[i] = Open(t.Context(), url, Config{Schema: "racy"})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("opener %d: %v", i, err)
		}
		defer stores[i].Close()
	}
	var rows, maxV int
	if err := stores[0].pool.QueryRow(t.Context(), `SELECT count(*), max(version) FROM racy.drover_migrations`).Scan(&rows, &maxV); err != nil {
		t.Fatal(err)
	}
	if rows != SchemaVersion() || maxV != SchemaVersion() {
		t.Errorf("drover_migrations has %d rows up to %d, want one per version up to %d", rows, maxV, SchemaVersion())
	}
}

// Two schemas in one database are two independent stores.
func TestSchemasAreIsolated(t *testing.T) {
	url := pg.URL(t)
	a := openTest(t, url, Config{Schema: "tenant_a"})
	b := openTest(t, url, Config{Schema: "Tenant_B"}) // quoted: case is kept
	la := acquire(t, a, "orders/0", "node-1")
	if _, err := a.Apply(t.Context(), &persistence.Batch{Source: "orders", Unit: "orders/0", Lease: la,
		Table: "Orders", Ops: upserts(3, "k", "1"), Checkpoint: "1"}); err != nil {
		t.Fatal(err)
	}
	if ls, err := b.List(t.Context()); err != nil || len(ls) != 0 {
		t.Errorf("leases seen from the other schema: %v, %v", ls, err)
	}
	if rs, err := b.Records(t.Context(), "Orders", "", 0); err != nil || len(rs) != 0 {
		t.Errorf("records seen from the other schema: %d, %v", len(rs), err)
	}
	if rs, err := a.Records(t.Context(), "Orders", "", 0); err != nil || len(rs) != 3 {
		t.Errorf("records of tenant_a: %d, %v; want 3", len(rs), err)
	}
	var tables []string
	rows, err := a.pool.Query(t.Context(), `SELECT schemaname || '.' || tablename FROM pg_tables
		WHERE schemaname IN ('tenant_a', 'Tenant_B', 'public') ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	want := "[Tenant_B.drover_checkpoints Tenant_B.drover_control_audit Tenant_B.drover_controls Tenant_B.drover_dead_letters " +
		"Tenant_B.drover_dedupe Tenant_B.drover_leases Tenant_B.drover_migrations Tenant_B.drover_nodes Tenant_B.drover_quality " +
		"Tenant_B.drover_sources tenant_a.Orders tenant_a.drover_checkpoints tenant_a.drover_control_audit tenant_a.drover_controls " +
		"tenant_a.drover_dead_letters tenant_a.drover_dedupe tenant_a.drover_leases " +
		"tenant_a.drover_migrations tenant_a.drover_nodes tenant_a.drover_quality tenant_a.drover_sources]"
	if fmt.Sprint(tables) != want {
		t.Errorf("tables = %v\nwant     %s", tables, want)
	}
}

// roundTrips counts what the driver sends: single statements (begin and
// commit included) and pipelined batches.
type roundTrips struct {
	queries, batches, batchQueries atomic.Int64
}

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.queries.Add(1)
	return ctx
}
func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.batches.Add(1)
	return ctx
}
func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {
	r.batchQueries.Add(1)
}
func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (r *roundTrips) reset() { r.queries.Store(0); r.batches.Store(0); r.batchQueries.Store(0) }

func (r *roundTrips) String() string {
	return fmt.Sprintf("%d statements, %d batches of %d statements", r.queries.Load(), r.batches.Load(), r.batchQueries.Load())
}

// openTraced opens a store on the test server whose statements rt counts.
func openTraced(t *testing.T) (*Store, *roundTrips) {
	t.Helper()
	pc, err := pgxpool.ParseConfig(pg.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	rt := &roundTrips{}
	pc.ConnConfig.Tracer = rt
	s, err := open(t.Context(), pc, Config{})
	if err != nil {
		t.Fatal(err)
	}
	return s, rt
}

// Apply sends one statement per table for a whole batch, whatever its size.
func TestApplyRoundTrips(t *testing.T) {
	s, rt := openTraced(t)
	defer s.Close()
	l := acquire(t, s, "orders/0", "node-1")
	dl := persistence.Op{Kind: persistence.OpDeadLetter, Position: "x", Reason: "bad"}
	stream := func(n int, pos string) *persistence.Batch {
		ops := append(upserts(n, "k", pos), persistence.Op{Kind: persistence.OpDelete, Key: "gone", Position: pos}, dl)
		return &persistence.Batch{Source: "orders", Unit: "orders/0", Lease: l, Table: "orders", Ops: ops, Checkpoint: pos}
	}
	queue := func(n int, pos string) *persistence.Batch {
		b := stream(n, pos)
		b.Dedupe, b.Checkpoint = true, ""
		for i := range b.Ops {
			b.Ops[i].MessageID = fmt.Sprintf("%s-%d", pos, i)
		}
		return b
	}
	// Warm up: the table is created and the statements prepared.
	if _, err := s.Apply(t.Context(), stream(10, "1")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply(t.Context(), queue(10, "2")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name                   string
		batch                  *persistence.Batch
		queries, batches, stmt int64
	}{
		// [fence, upsert, delete, dead letters, checkpoint]
		{"stream of 1", stream(1, "3"), 0, 1, 5},
		{"stream of 2000", stream(2000, "4"), 0, 1, 5},
		// begin, [fence, dedupe], [upsert, delete, dead letters], commit
		{"queue of 2000", queue(2000, "5"), 2, 2, 5},
	} {
		rt.reset()
		a, err := s.Apply(t.Context(), tc.batch)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if a.Upserted == 0 {
			t.Fatalf("%s: nothing upserted: %+v", tc.name, a)
		}
		if rt.queries.Load() != tc.queries || rt.batches.Load() != tc.batches || rt.batchQueries.Load() != tc.stmt {
			t.Errorf("%s: %s; want %d statements, %d batches of %d statements", tc.name, rt, tc.queries, tc.batches, tc.stmt)
		}
	}
}

// A store whose server goes away fails its calls, loses nothing it
// committed, and works again once the server is back.
func TestOutageAndRecovery(t *testing.T) {
	srv := pgtest.NewLocal()
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Error(err)
		}
	})
	s := openTest(t, srv.URL(t), Config{})
	l := acquire(t, s, "orders/0", "node-1")
	batch := func(pos string) *persistence.Batch {
		return &persistence.Batch{Source: "orders", Unit: "orders/0", Lease: l, Table: "orders",
			Ops: upserts(5, "k"+pos+"-", pos), Checkpoint: pos}
	}
	if _, err := s.Apply(t.Context(), batch("1")); err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	_, err := s.Apply(ctx, batch("2"))
	cancel()
	if err == nil {
		t.Fatal("Apply succeeded with the server down")
	}
	if errors.Is(err, persistence.ErrLeaseLost) {
		t.Fatalf("an outage reported as a lost lease: %v", err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	// The pool may hand out a connection that died with the server first.
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err = s.Apply(t.Context(), batch("2"))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Apply still failing 30s after the server returned: %v", err)
		}
	}
	rs, err := s.Records(t.Context(), "orders", "", 0)
	if err != nil || len(rs) != 10 {
		t.Fatalf("records after recovery: %d, %v; want 10", len(rs), err)
	}
	c, err := s.Checkpoint(t.Context(), "orders/0")
	if err != nil || c.Position != "2" {
		t.Fatalf("checkpoint after recovery: %+v, %v; want 2", c, err)
	}
}

// Large batches, odd keys and quoted table names go through unnest intact.
func TestApplyLargeBatchOddKeys(t *testing.T) {
	s := openTest(t, pg.URL(t), Config{})
	l := acquire(t, s, "orders/0", "node-1")
	ops := upserts(5000, "k", "7")
	odd := []string{" ", "with space", `quote"d`, "semi;colon", "ünïcødé", "tab\tkey", "NULL", "{a,b}", `back\slash`}
	for i, k := range odd {
		ops = append(ops, persistence.Op{Kind: persistence.OpUpsert, Key: k, Doc: fmt.Appendf(nil, `{"odd":%d}`, i), Position: "7"})
	}
	a, err := s.Apply(t.Context(), &persistence.Batch{Source: "orders", Unit: "orders/0", Lease: l, Table: "Mixed_Case", Ops: ops})
	if err != nil {
		t.Fatal(err)
	}
	if a.Upserted != len(ops) {
		t.Fatalf("upserted %d, want %d", a.Upserted, len(ops))
	}
	rs, err := s.Records(t.Context(), "Mixed_Case", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	got := make(map[string]bool, len(rs))
	for i, r := range rs {
		got[r.Key] = true
		if i > 0 && rs[i-1].Key >= r.Key {
			t.Fatalf("records not in byte order: %q before %q", rs[i-1].Key, r.Key)
		}
	}
	for _, k := range odd {
		if !got[k] {
			t.Errorf("key %q missing", k)
		}
	}
	if len(rs) != len(ops) {
		t.Errorf("%d records, want %d", len(rs), len(ops))
	}
	if rs, err := s.Records(t.Context(), "mixed_case", "", 0); err != nil || len(rs) != 0 {
		t.Errorf("table names are case-sensitive (quoted): mixed_case has %d rows, %v", len(rs), err)
	}
}

// A stream batch (one pipelined implicit transaction) is all or nothing
// and fenced, like the transactional path storetest exercises through
// dedupe batches.
func TestStreamBatchAtomic(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, s *Store, b *persistence.Batch)
		want  error
	}{
		{"stale token", func(t *testing.T, s *Store, b *persistence.Batch) {
			if _, err := s.Acquire(t.Context(), persistence.AcquireRequest{Unit: b.Unit, Owner: "node-2", TTL: time.Hour, Live: []string{"node-2"}}); err != nil {
				t.Fatal(err)
			}
		}, persistence.ErrLeaseLost},
		{"no lease row", func(t *testing.T, s *Store, b *persistence.Batch) {
			b.Unit = "orders/9"
			b.Lease.Unit = "orders/9"
		}, persistence.ErrLeaseLost},
		{"invalid document last", func(t *testing.T, s *Store, b *persistence.Batch) {
			b.Ops = append(b.Ops, persistence.Op{Kind: persistence.OpUpsert, Key: "z", Doc: []byte(`{"broken":`), Position: "9"})
		}, nil},
		{"failure at the checkpoint", func(t *testing.T, s *Store, b *persistence.Batch) {
			failMidTx(t, s)
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openTest(t, pg.URL(t), Config{})
			l := acquire(t, s, "orders/0", "node-1")
			seed := &persistence.Batch{Source: "orders", Unit: "orders/0", Lease: l, Table: "orders",
				Ops: upserts(3, "k", "1"), Checkpoint: "1"}
			if _, err := s.Apply(t.Context(), seed); err != nil {
				t.Fatal(err)
			}
			before, err := s.Records(t.Context(), "orders", "", 0)
			if err != nil {
				t.Fatal(err)
			}
			b := &persistence.Batch{Source: "orders", Unit: "orders/0", Lease: l, Table: "orders",
				Ops: append(upserts(3, "k", "5"),
					persistence.Op{Kind: persistence.OpDelete, Key: "k000001", Position: "6"},
					persistence.Op{Kind: persistence.OpDeadLetter, Position: "7", Reason: "bad"}),
				Checkpoint: "8"}
			tc.setup(t, s, b)
			_, err = s.Apply(t.Context(), b)
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("apply: %v, want failure %v", err, tc.want)
			}
			after, err := s.Records(t.Context(), "orders", "", 0)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(after) != fmt.Sprint(before) {
				t.Errorf("records changed:\n%v\nwas\n%v", after, before)
			}
			if c, err := s.Checkpoint(t.Context(), "orders/0"); err != nil || c.Position != "1" {
				t.Errorf("checkpoint = %+v, %v; want 1", c, err)
			}
			if ds, err := s.DeadLetters(t.Context(), persistence.DeadLetterFilter{}); err != nil || len(ds) != 0 {
				t.Errorf("dead letters = %v, %v; want none", ds, err)
			}
		})
	}
}

// A dead letter whose message key is binary (a Kafka key may be any bytes)
// is stored, not allowed to fail its batch forever.
func TestDeadLetterBinaryKey(t *testing.T) {
	s := openTest(t, pg.URL(t), Config{})
	l := acquire(t, s, "orders/0", "node-1")
	payload := []byte{0, 0xff, 'x'}
	_, err := s.Apply(t.Context(), &persistence.Batch{Source: "orders", Unit: "orders/0", Lease: l,
		Ops: []persistence.Op{{Kind: persistence.OpDeadLetter, Position: "1", MsgKey: "k\x00\xff", Payload: payload, Reason: "not JSON"}}})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := s.DeadLetters(t.Context(), persistence.DeadLetterFilter{})
	if err != nil || len(ds) != 1 {
		t.Fatalf("dead letters = %v, %v", ds, err)
	}
	if ds[0].MsgKey != "k\uFFFD\uFFFD" || string(ds[0].Payload) != string(payload) {
		t.Errorf("dead letter key %q payload %q; want the key made valid text and the payload intact", ds[0].MsgKey, ds[0].Payload)
	}
}

// A store opened ReadOnly (drover dlq list, show) reads what a node wrote,
// and the server refuses every write it is asked for; it creates and
// migrates nothing, so a database without drover's tables stays empty.
func TestReadOnlyOpenWritesNothing(t *testing.T) {
	url := pg.URL(t)
	w := openTest(t, url, Config{})
	l := acquire(t, w, "orders/0", "node-1")
	if _, err := w.Apply(t.Context(), &persistence.Batch{Source: "orders", Unit: "orders/0", Lease: l,
		Ops: []persistence.Op{{Kind: persistence.OpDeadLetter, Position: "1", Payload: []byte("x"), Reason: "not JSON"}}}); err != nil {
		t.Fatal(err)
	}

	r := openTest(t, url, Config{ReadOnly: true})
	ds, err := r.DeadLetters(t.Context(), persistence.DeadLetterFilter{})
	if err != nil || len(ds) != 1 {
		t.Fatalf("read-only dead letters = %v, %v; want the one written", ds, err)
	}
	var pe *Error
	if err := r.SetDeadLetterStatus(t.Context(), ds[0].ID, persistence.DeadLetterResolved); !errors.As(err, &pe) || pe.Code != "25006" {
		t.Errorf("resolve through a read-only store: %v, want the server's read-only refusal (SQLSTATE 25006)", err)
	}
	if d, err := w.DeadLetter(t.Context(), ds[0].ID); err != nil || d.Status != persistence.DeadLetterPending {
		t.Errorf("after the refused resolve: %+v, %v; want it still pending", d, err)
	}
	if _, err := r.Acquire(t.Context(), persistence.AcquireRequest{Unit: "orders/1", Owner: "tool", TTL: time.Hour, Live: []string{"tool"}}); err == nil {
		t.Error("a read-only store acquired a lease")
	}

	_, err = Open(t.Context(), url, Config{ReadOnly: true, Schema: "never_made"})
	if err == nil || !strings.Contains(err.Error(), "never_made") {
		t.Errorf("read-only open of a schema without drover's tables: %v, want an error naming it", err)
	}
	var made bool
	if err := w.pool.QueryRow(t.Context(), "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'never_made')").Scan(&made); err != nil || made {
		t.Errorf("the read-only open created schema never_made (%v)", err)
	}
}
