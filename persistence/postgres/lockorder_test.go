package postgres

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/drover-dev/drover/persistence"
)

// gate makes concurrent inserts into a table interleave the way that
// deadlocks when two transactions insert the same ids in opposite orders:
// a trigger lets every statement insert its first row, then holds its
// second row until release, which the test calls once both transactions
// wait for a lock.
type gate struct {
	t    *testing.T
	s    *Store
	ctl  *pgx.Conn
	once sync.Once
}

const gateKey = 4242

func installGate(t *testing.T, url string, s *Store, table string) *gate {
	t.Helper()
	fn := s.name("drover_test_gate")
	if _, err := s.pool.Exec(t.Context(), `
		CREATE OR REPLACE FUNCTION `+fn+`() RETURNS trigger LANGUAGE plpgsql AS $$
		DECLARE
			n int := coalesce(nullif(current_setting('drover_test.rows', true), ''), '0')::int + 1;
		BEGIN
			PERFORM set_config('drover_test.rows', n::text, true);
			IF n = 2 THEN
				PERFORM pg_advisory_xact_lock_shared(`+strconv.Itoa(gateKey)+`);
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER drover_test_gate BEFORE INSERT ON `+s.name(table)+`
			FOR EACH ROW EXECUTE FUNCTION `+fn+`();`); err != nil {
		t.Fatalf("install the gate: %v", err)
	}
	ctl, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ctl.Close(context.Background()) })
	if _, err := ctl.Exec(t.Context(), "SELECT pg_advisory_lock($1)", gateKey); err != nil {
		t.Fatal(err)
	}
	return &gate{t: t, s: s, ctl: ctl}
}

// gated runs run(0) and run(1) at once behind a gate on table, opens the
// gate once both wait, and returns their errors.
func gated(t *testing.T, url string, s *Store, table string, run func(i int) error) []error {
	t.Helper()
	g := installGate(t, url, s, table)
	defer g.open()
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { errs[i] = run(i) })
	}
	g.openWhenBothWait()
	wg.Wait()
	return errs
}

// openWhenBothWait waits until two sessions of the database wait for a
// lock (the gate, or each other's rows), then opens the gate.
func (g *gate) openWhenBothWait() {
	g.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond) // polling another process's state
	defer tick.Stop()
	for {
		var n int
		if err := g.ctl.QueryRow(g.t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n); err != nil {
			g.t.Fatal(err)
		}
		if n >= 2 {
			break
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("%d sessions wait at the gate after 20s, want 2", n)
		}
		<-tick.C
	}
	g.open()
}

func (g *gate) open() {
	g.once.Do(func() {
		if _, err := g.ctl.Exec(context.Background(), "SELECT pg_advisory_unlock($1)", gateKey); err != nil {
			g.t.Error(err)
		}
	})
}

// openLockOrder opens a store whose sessions detect deadlocks after 100 ms
// rather than 1 s (superuser only; else the default).
func openLockOrder(t *testing.T) (string, *Store) {
	t.Helper()
	url := pg.URL(t)
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	var super string
	if err := pgxQueryRow(t, url, "SELECT current_setting('is_superuser')", &super); err == nil && super == "on" {
		pc.ConnConfig.RuntimeParams["deadlock_timeout"] = "100ms"
	}
	s, err := open(t.Context(), pc, Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return url, s
}

func pgxQueryRow(t *testing.T, url, q string, dst any) error {
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.QueryRow(t.Context(), q).Scan(dst)
}

// The gate works: two transactions running the dedupe insert with the same
// ids in opposite orders deadlock, and PostgreSQL aborts one with 40P01.
// This is what Apply did before it sorted the ids (issue 9 item 13).
func TestDedupeOppositeOrdersDeadlock(t *testing.T) {
	url, s := openLockOrder(t)
	orders := [][]string{{"m-1", "m-2"}, {"m-2", "m-1"}}
	errs := gated(t, url, s, "drover_dedupe", func(i int) error {
		return pgx.BeginFunc(t.Context(), s.pool, func(tx pgx.Tx) error {
			rows, err := tx.Query(t.Context(), s.sql.dedupe, "jobs", orders[i])
			if err != nil {
				return err
			}
			rows.Close()
			return rows.Err()
		})
	})
	deadlocks, ok := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case isCode(err, "40P01"):
			deadlocks++
		default:
			t.Errorf("unexpected error: %v", err)
		}
	}
	if deadlocks != 1 || ok != 1 {
		t.Fatalf("opposite orders: %d deadlocked, %d committed (%v); want one of each: the gate does not reproduce the deadlock", deadlocks, ok, errs)
	}
}

// warm applies one record under l to table (of l's source, named alike),
// so that the table exists before a gate goes in: creating it would take
// a lock of its own.
func warm(t *testing.T, s *Store, l persistence.Lease, table string) {
	t.Helper()
	if _, err := s.Apply(t.Context(), &persistence.Batch{Source: table, Unit: l.Unit, Lease: l, Table: table,
		Ops: []persistence.Op{{Kind: persistence.OpUpsert, Key: "warm", Doc: []byte(`{}`), Position: "0"}}}); err != nil {
		t.Fatal(err)
	}
}

// Apply writes dedupe ids in one order whatever the batch order: the same
// interleaving as above makes one transaction wait for the other, both
// commit, and the one that waited finds every id a duplicate.
func TestApplyDedupeLockOrder(t *testing.T) {
	url, s := openLockOrder(t)
	slots := []persistence.Lease{acquire(t, s, "jobs/slot-0", "node-1"), acquire(t, s, "jobs/slot-1", "node-1")}
	warm(t, s, slots[0], "jobs")
	orders := [][]string{{"m-1", "m-2"}, {"m-2", "m-1"}}
	applied := make([]persistence.Applied, 2)
	errs := gated(t, url, s, "drover_dedupe", func(i int) (err error) {
		b := &persistence.Batch{Source: "jobs", Unit: slots[i].Unit, Lease: slots[i], Table: "jobs", Dedupe: true}
		for _, id := range orders[i] {
			b.Ops = append(b.Ops, persistence.Op{Kind: persistence.OpUpsert, Key: slots[i].Unit + "/" + id,
				Doc: []byte(`{}`), Position: id, MessageID: id})
		}
		applied[i], err = s.Apply(t.Context(), b)
		return err
	})
	for i, err := range errs {
		var pe *Error
		if errors.As(err, &pe) && pe.Code == "40P01" {
			t.Fatalf("slot %d: deadlock: %v", i, err)
		}
		if err != nil {
			t.Fatalf("slot %d: %v", i, err)
		}
	}
	var dups [][]string
	for _, a := range applied {
		d := slices.Clone(a.Duplicates)
		slices.Sort(d)
		dups = append(dups, d)
	}
	slices.SortFunc(dups, func(a, b []string) int { return len(a) - len(b) })
	if len(dups[0]) != 0 || !slices.Equal(dups[1], []string{"m-1", "m-2"}) {
		t.Errorf("duplicates %v and %v; want one batch applied and the other all duplicates", dups[0], dups[1])
	}
}

// Units that share a records table write overlapping keys in one order
// too: two stream batches (one pipelined transaction each) upserting the
// same keys in opposite orders, interleaved by the gate, both commit.
func TestApplyRecordsLockOrder(t *testing.T) {
	url, s := openLockOrder(t)
	units := []persistence.Lease{acquire(t, s, "orders/0", "node-1"), acquire(t, s, "orders/1", "node-1")}
	warm(t, s, units[0], "orders")
	orders := [][]string{{"k-1", "k-2"}, {"k-2", "k-1"}}
	errs := gated(t, url, s, "orders", func(i int) error {
		b := &persistence.Batch{Source: "orders", Unit: units[i].Unit, Lease: units[i], Table: "orders", Checkpoint: "1"}
		for _, k := range orders[i] {
			b.Ops = append(b.Ops, persistence.Op{Kind: persistence.OpUpsert, Key: k,
				Doc: []byte(`{"by":"` + units[i].Unit + `"}`), Position: "1"})
		}
		_, err := s.Apply(t.Context(), b)
		return err
	})
	for i, err := range errs {
		if err != nil {
			t.Errorf("unit %d: %v", i, err)
		}
	}
	rs, err := s.Records(t.Context(), "orders", "", 0)
	if err != nil || len(rs) != 3 {
		t.Fatalf("records: %v, %v; want warm, k-1 and k-2", rs, err)
	}
	if rs[0].Unit != rs[1].Unit {
		t.Errorf("k-1 by %s, k-2 by %s: want both by the batch that committed last", rs[0].Unit, rs[1].Unit)
	}
}
