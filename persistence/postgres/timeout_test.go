package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/persistence/internal/sqlstore"
)

// orphan is a transaction on a raw connection with drover's session
// settings that took a unit's fence (the FOR UPDATE on its lease row) and
// then went silent without closing, as a node whose host vanished
// mid-batch leaves one behind.
type orphan struct {
	conn *pgx.Conn
	pid  uint32
}

func startOrphan(t *testing.T, url string, timeout time.Duration, s *Store, l persistence.Lease) *orphan {
	t.Helper()
	cc, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range sessionParams(timeout) {
		cc.RuntimeParams[k] = v
	}
	conn, err := pgx.ConnectConfig(t.Context(), cc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	if _, err := conn.Exec(t.Context(), "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(t.Context(), s.sql.fence, l.Unit, l.Token); err != nil {
		t.Fatalf("orphan: fence %s: %v", l.Unit, err)
	}
	return &orphan{conn: conn, pid: conn.PgConn().PID()}
}

// alive reports whether the orphan's backend still sits idle in its
// transaction (asked from another connection; the orphan stays silent).
func (o *orphan) alive(t *testing.T, s *Store) bool {
	t.Helper()
	var state string
	err := s.pool.QueryRow(t.Context(), "SELECT state FROM pg_stat_activity WHERE pid = $1", int32(o.pid)).Scan(&state)
	if errors.Is(err, pgx.ErrNoRows) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return state == "idle in transaction"
}

// within runs f with a context of its own and fails the test when f has
// not returned after limit (the call hangs): f's context is then cancelled
// so that the goroutine ends.
func within[T any](t *testing.T, limit time.Duration, what string, f func(ctx context.Context) (T, error)) (T, time.Duration, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		v, err := f(ctx)
		done <- result{v, err}
	}()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case r := <-done:
		return r.v, time.Since(start), r.err
	case <-timer.C:
		cancel()
		<-done
		t.Fatalf("%s: still waiting after %s: it hangs", what, limit)
	}
	panic("unreachable")
}

// TestOrphanedTransactionIsCutOff is issue 9 item 7. An orphaned
// transaction holds the fence lock of orders/0. While it lives: a takeover
// of orders/0 fails fast with a lock timeout instead of waiting, and
// another unit (orders/1) keeps applying and renewing. Once the server cuts
// the orphan off (idle_in_transaction_session_timeout), the takeover
// succeeds, within the bound store.timeout sets. Without the session
// timeouts and the per-call deadline the takeover waits for as long as the
// orphan lives (hours, until TCP keepalive gives up): within fails it.
func TestOrphanedTransactionIsCutOff(t *testing.T) {
	const timeout = 2 * time.Second // lock_timeout 1 s, idle-in-transaction 2 s
	url := pg.URL(t)
	s := openTest(t, url, Config{Timeout: timeout})
	stuck := acquire(t, s, "orders/0", "node-1")
	other := acquire(t, s, "orders/1", "node-1")
	// The orphan's idle timer starts on the server when its last
	// statement ends, inside startOrphan: begun is no later than that, so
	// a time since begun never understates how long the orphan was idle.
	begun := time.Now()
	o := startOrphan(t, url, timeout, s, stuck)
	orphanedAt := time.Now()

	// (c) Other units go on: applies and renewals of orders/1.
	for i := range 3 {
		pos := fmt.Sprint(i + 1)
		if _, err := s.Apply(t.Context(), &persistence.Batch{Source: "orders", Unit: other.Unit, Lease: other,
			Table: "orders", Ops: upserts(10, "k"+pos+"-", pos), Checkpoint: pos}); err != nil {
			t.Fatalf("apply %d to orders/1 while orders/0 is locked: %v", i, err)
		}
	}

	// (a) The takeover of orders/0 fails fast, with a lock timeout, and
	// (c) orders/1 goes on applying while that takeover waits.
	takeover := func(ctx context.Context) (persistence.Lease, error) {
		return s.Acquire(ctx, persistence.AcquireRequest{Unit: "orders/0", Owner: "node-2", TTL: time.Hour, Live: []string{"node-2"}})
	}
	stop := make(chan struct{})
	stopApplies := sync.OnceFunc(func() { close(stop) })
	defer stopApplies() // also when within fails the test
	type applies struct {
		n    int
		errs []error
	}
	during := make(chan applies, 1)
	go func() {
		var a applies
		for i := 10; ; i++ {
			select {
			case <-stop:
				during <- a
				return
			default:
			}
			if a.n >= 20 {
				<-stop
				continue
			}
			pos := fmt.Sprint(i)
			_, err := s.Apply(t.Context(), &persistence.Batch{Source: "orders", Unit: other.Unit, Lease: other,
				Table: "orders", Ops: upserts(5, "d"+pos+"-", pos), Checkpoint: pos})
			if err != nil {
				a.errs = append(a.errs, err)
			} else {
				a.n++
			}
		}
	}()
	_, took, err := within(t, 3*timeout, "takeover of a unit whose fence an orphan holds", takeover)
	stopApplies()
	a := <-during
	var pe *Error
	if !errors.As(err, &pe) || pe.Code != "55P03" {
		t.Fatalf("takeover while the orphan lives: %v (after %s), want a lock timeout (SQLSTATE 55P03)", err, took)
	}
	if a.n == 0 || len(a.errs) > 0 {
		t.Fatalf("applies to orders/1 while the takeover of orders/0 waited: %d succeeded, errors %v", a.n, a.errs)
	}
	t.Logf("%d applies to orders/1 while the takeover waited", a.n)
	t.Logf("takeover while the orphan lives: %v after %s", err, took)
	if !o.alive(t, s) {
		t.Fatalf("the orphan was cut off %s after it began, before the test could use it (the machine is too slow for these timeouts)", time.Since(orphanedAt))
	}
	// A TTL of 3 h makes both leases (acquired for 1 h) due: their rows are
	// to be written, and the locked one is skipped.
	renewed, lost, err := s.RenewLeases(t.Context(), "node-1", []persistence.Lease{stuck, other}, 3*time.Hour)
	if err != nil || len(renewed) != 1 || renewed[0].Unit != "orders/1" || len(lost) != 0 {
		t.Fatalf("renewal while orders/0 is locked: renewed %v, lost %v, %v; want orders/1 renewed, orders/0 skipped", renewed, lost, err)
	}

	// (b) The server cuts the orphan off; then the takeover succeeds.
	bound := 2*timeout + 5*time.Second
	var l persistence.Lease
	for {
		l, _, err = within(t, 3*timeout, "takeover", takeover)
		if err == nil {
			break
		}
		if !errors.As(err, &pe) || pe.Code != "55P03" {
			t.Fatalf("takeover: %v, want success or a lock timeout", err)
		}
		if time.Since(orphanedAt) > bound {
			t.Fatalf("takeover still failing %s after the orphan went silent (bound %s): %v", time.Since(orphanedAt), bound, err)
		}
	}
	t.Logf("takeover succeeded %s after the orphan went silent", time.Since(orphanedAt).Round(time.Millisecond))
	if l.Owner != "node-2" || l.Token != stuck.Token+1 {
		t.Errorf("lease = %+v, want node-2 token %d", l, stuck.Token+1)
	}
	// The lock goes when the server aborts the orphan's transaction; its
	// backend leaves pg_stat_activity a moment later, when it has exited.
	// So the takeover must not come before the idle timeout could fire, and
	// the backend must be gone soon after it.
	if since := time.Since(begun); since < timeout {
		t.Errorf("the takeover succeeded %s after the orphan went silent, before its idle timeout (%s): the orphan still held the fence", since, timeout)
	}
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	for deadline := time.Now().Add(5 * time.Second); o.alive(t, s); <-poll.C {
		if time.Now().After(deadline) {
			t.Fatal("the takeover succeeded while the orphan still lives (its backend stayed 5 s after)")
		}
	}
	if _, err := o.conn.Exec(context.Background(), "SELECT 1"); err == nil {
		t.Error("the orphan's connection still works: the server did not cut it off")
	}
	if _, err := s.Apply(t.Context(), &persistence.Batch{Source: "orders", Unit: other.Unit, Lease: other,
		Table: "orders", Ops: upserts(1, "after", "9"), Checkpoint: "9"}); err != nil {
		t.Errorf("apply to orders/1 after the takeover of orders/0: %v", err)
	}
}

// Every call has a deadline of its own: with the pool exhausted (by a
// connection the test holds), a call given a context without a deadline
// fails after Config.Timeout instead of waiting for a connection forever.
func TestCallsHaveADeadline(t *testing.T) {
	const timeout = 300 * time.Millisecond
	url := pg.URL(t)
	s := openTest(t, url, Config{Timeout: timeout, MaxConns: 1})
	if got := s.pool.Config().MaxConns; got != 1 {
		t.Fatalf("pool MaxConns = %d, want Config.MaxConns 1", got)
	}
	held, err := s.pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	calls := map[string]func(ctx context.Context) (any, error){
		"List":       func(ctx context.Context) (any, error) { return s.List(ctx) },
		"Checkpoint": func(ctx context.Context) (any, error) { return s.Checkpoint(ctx, "orders/0") },
		"Apply": func(ctx context.Context) (any, error) {
			return s.Apply(ctx, &persistence.Batch{Source: "orders", Unit: "orders/0",
				Lease: persistence.Lease{Unit: "orders/0", Token: 1}, Checkpoint: "1"})
		},
		"RenewLeases": func(ctx context.Context) (any, error) {
			r, _, err := s.RenewLeases(ctx, "node-1", []persistence.Lease{{Unit: "orders/0", Token: 1}}, time.Minute)
			return r, err
		},
		"InitSource": func(ctx context.Context) (any, error) { return s.InitSource(ctx, "orders", []string{"orders/0"}) },
	}
	for name, call := range calls {
		// within's context has no deadline: only the store's own can end the call.
		_, took, err := within(t, 20*timeout, name+" with the pool exhausted", call)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s with the pool exhausted: %v, want the store's deadline", name, err)
		}
		if took < timeout {
			t.Errorf("%s gave up after %s, before its deadline %s", name, took, timeout)
		}
	}
	// A shorter context of the caller's is kept.
	ctx, cancel := context.WithTimeout(t.Context(), timeout/10)
	defer cancel()
	start := time.Now()
	if _, err := s.List(ctx); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > timeout {
		t.Errorf("List with a shorter context: %v after %s, want the caller's deadline", err, time.Since(start))
	}
}

// The session timeouts are set on every connection, and a setting the URL
// makes itself wins.
func TestSessionSettings(t *testing.T) {
	url := pg.URL(t)
	s := openTest(t, url, Config{Timeout: 4 * time.Second})
	show := func(s *Store, name string) string {
		var v string
		if err := s.pool.QueryRow(t.Context(), "SELECT current_setting($1)", name).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	for name, want := range map[string]string{"lock_timeout": "2s", "statement_timeout": "4s", "idle_in_transaction_session_timeout": "4s"} {
		if got := show(s, name); got != want {
			t.Errorf("%s = %s, want %s", name, got, want)
		}
	}
	pc, err := pgxpool.ParseConfig(url + "&lock_timeout=1234ms")
	if err != nil {
		t.Fatal(err)
	}
	s2, err := open(t.Context(), pc, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if got := show(s2, "lock_timeout"); got != "1234ms" {
		t.Errorf("lock_timeout with the URL's own = %s, want 1234ms", got)
	}
	if got := show(s2, "statement_timeout"); got != "10s" {
		t.Errorf("statement_timeout by default = %s, want 10s", got)
	}
}

// A renewal skips a lease row another open transaction has locked FOR
// UPDATE, without waiting for it: that lease is neither renewed nor lost,
// and the others are renewed.
func TestRenewLeasesSkipsLockedRow(t *testing.T) {
	const timeout = 3 * time.Second // a wait would end in a lock timeout after 1.5 s
	url := pg.URL(t)
	s := openTest(t, url, Config{Timeout: timeout})
	a := acquire(t, s, "orders/0", "node-1")
	b := acquire(t, s, "orders/1", "node-1")
	c := acquire(t, s, "orders/2", "node-1")
	if _, err := s.Acquire(t.Context(), persistence.AcquireRequest{Unit: "orders/2", Owner: "node-2", TTL: time.Hour, Live: []string{"node-2"}}); err != nil {
		t.Fatal(err)
	}
	locker, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close(context.Background())
	tx, err := locker.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), "SELECT 1 FROM "+s.name("drover_leases")+" WHERE unit = 'orders/0' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	type result struct {
		renewed []persistence.Lease
		lost    []string
	}
	r, took, err := within(t, 3*timeout, "renewal with a locked lease row", func(ctx context.Context) (result, error) {
		// 3 h: every lease (acquired for 1 h) is due, the locked one too
		renewed, lost, err := s.RenewLeases(ctx, "node-1", []persistence.Lease{a, b, c}, 3*time.Hour)
		return result{renewed, lost}, err
	})
	if err != nil {
		t.Fatalf("renewal with orders/0 locked: %v after %s, want it skipped without waiting", err, took)
	}
	if len(r.renewed) != 1 || r.renewed[0].Unit != "orders/1" || r.renewed[0].Token != b.Token {
		t.Errorf("renewed = %+v, want orders/1 only", r.renewed)
	}
	if len(r.lost) != 1 || r.lost[0] != "orders/2" {
		t.Errorf("lost = %v, want [orders/2] (orders/0 is locked, not lost)", r.lost)
	}
	if !r.renewed[0].ExpiresAt.After(b.ExpiresAt) {
		t.Errorf("orders/1 ExpiresAt %s not moved from %s", r.renewed[0].ExpiresAt, b.ExpiresAt)
	}
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Its row is untouched; only node-1's heartbeat moved its RenewedAt.
	if got := leaseOf(t, s, "orders/0"); !got.ExpiresAt.Equal(a.ExpiresAt) || !got.AcquiredAt.Equal(a.AcquiredAt) ||
		!got.RenewedAt.Equal(r.renewed[0].RenewedAt) {
		t.Errorf("the skipped lease = %+v, want its row untouched %+v and node-1's heartbeat %s", got, a, r.renewed[0].RenewedAt)
	}
	// Unlocked, it is renewed again.
	renewed, lost, err := s.RenewLeases(t.Context(), "node-1", []persistence.Lease{a, b}, 2*time.Hour)
	if err != nil || len(renewed) != 2 || len(lost) != 0 {
		t.Errorf("renewal after the lock is gone: renewed %v, lost %v, %v; want both", renewed, lost, err)
	}
}

func leaseOf(t *testing.T, s *Store, unit string) persistence.Lease {
	t.Helper()
	ls, err := s.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		if l.Unit == unit {
			return l
		}
	}
	t.Fatalf("no lease of %s", unit)
	return persistence.Lease{}
}

// RenewLeases is one round trip, whatever the number of leases.
func TestRenewLeasesOneRoundTrip(t *testing.T) {
	s, rt := openTraced(t)
	defer s.Close()
	var ls []persistence.Lease
	for i := range 200 {
		ls = append(ls, acquire(t, s, fmt.Sprintf("orders/%d", i), "node-1"))
	}
	rt.reset()
	renewed, lost, err := s.RenewLeases(t.Context(), "node-1", ls, time.Hour)
	if err != nil || len(renewed) != len(ls) || len(lost) != 0 {
		t.Fatalf("renewed %d, lost %v, %v; want all %d", len(renewed), lost, err, len(ls))
	}
	if rt.queries.Load() != 1 || rt.batches.Load() != 0 {
		t.Errorf("renewal of %d leases: %s; want 1 statement", len(ls), rt)
	}
}

// PruneDedupe deletes a backlog larger than one chunk, one bounded
// statement per chunk, and keeps what is newer than its cutoff.
func TestPruneDedupeInChunks(t *testing.T) {
	s, rt := openTraced(t)
	defer s.Close()
	const old = 2*sqlstore.PruneChunk + 500
	if _, err := s.pool.Exec(t.Context(), `INSERT INTO `+s.name("drover_dedupe")+` (source, message_id, applied_at)
		SELECT 'jobs', 'old-' || i, now() - interval '10 days' FROM generate_series(1, $1) AS i
		UNION ALL SELECT 'jobs', 'new-' || i, now() FROM generate_series(1, 5) AS i`, old); err != nil {
		t.Fatal(err)
	}
	rt.reset()
	n, err := s.PruneDedupe(t.Context(), time.Now().Add(-24*time.Hour))
	if err != nil || n != old {
		t.Fatalf("pruned %d, %v; want %d", n, err, old)
	}
	if got := rt.queries.Load(); got != 3 {
		t.Errorf("%d statements for %d rows, want 3 chunks of at most %d", got, old, sqlstore.PruneChunk)
	}
	var left int
	if err := s.pool.QueryRow(t.Context(), `SELECT count(*) FROM `+s.name("drover_dedupe")).Scan(&left); err != nil || left != 5 {
		t.Errorf("%d rows left, %v; want the 5 new ones", left, err)
	}
}
