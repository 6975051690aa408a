package postgres

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/clock"
	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/persistence/postgres/pgtest"
	"github.com/drover-dev/drover/persistence/storetest"
	"github.com/drover-dev/drover/testkit"
)

// pg is this test binary's PostgreSQL server.
var pg = pgtest.New()

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m, pg)) }

// opened remembers the URL and Config each test store was opened with, so
// that the suite can reopen its database.
type opened struct {
	mu   sync.Mutex
	urls map[*Store]openArgs
}

type openArgs struct {
	url string
	cfg Config
}

func (o *opened) open(t *testing.T, url string, cfg Config) *Store {
	t.Helper()
	s, err := Open(t.Context(), url, cfg)
	if err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	t.Cleanup(func() { s.Close() })
	o.mu.Lock()
	defer o.mu.Unlock()
	o.urls[s] = openArgs{url, cfg}
	return s
}

func (o *opened) args(t *testing.T, s persistence.Store) openArgs {
	o.mu.Lock()
	defer o.mu.Unlock()
	a, ok := o.urls[s.(*Store)]
	if !ok {
		t.Fatalf("store %p was not opened by the harness", s)
	}
	return a
}

func harness(cfg Config) storetest.Harness {
	o := &opened{urls: make(map[*Store]openArgs)}
	return storetest.Harness{
		Open: func(t *testing.T, _ clock.Clock) persistence.Store {
			return o.open(t, pg.URL(t), cfg)
		},
		Schema: &storetest.Schema{
			Version: SchemaVersion(),
			Reopen: func(t *testing.T, s persistence.Store) (persistence.Store, error) {
				a := o.args(t, s)
				return Open(t.Context(), a.url, a.cfg)
			},
			Current: func(t *testing.T, s persistence.Store) int {
				ps := s.(*Store)
				var v int
				if err := ps.pool.QueryRow(t.Context(), "SELECT max(version) FROM "+ps.name("drover_migrations")).Scan(&v); err != nil {
					t.Fatalf("read schema version: %v", err)
				}
				return v
			},
			Stamp: func(t *testing.T, s persistence.Store, v int) {
				ps := s.(*Store)
				if _, err := ps.pool.Exec(t.Context(), "INSERT INTO "+ps.name("drover_migrations")+" (version, name) VALUES ($1, 'from a newer drover')", v); err != nil {
					t.Fatalf("stamp schema version %d: %v", v, err)
				}
			},
		},
		FailMidTx: failMidTx,
		Refuse:    refuseBad,
	}
}

// refuseBad adds the CHECK constraint (doc->>'bad' IS NULL) to a records
// table.
func refuseBad(t *testing.T, s persistence.Store, table string) {
	t.Helper()
	ps := s.(*Store)
	if _, err := ps.pool.Exec(context.Background(), `ALTER TABLE `+ps.name(table)+
		` ADD CONSTRAINT no_bad CHECK (doc->>'bad' IS NULL)`); err != nil {
		t.Fatalf("add the check constraint to %s: %v", table, err)
	}
}

// failMidTx makes the next write of a checkpoint raise an error inside the
// database: Apply writes the records, deletions, dead letters and dedupe
// ids before the checkpoint, so the failure comes after part of the batch
// is written. The counter is a sequence because nextval survives the
// rollback the failure causes.
func failMidTx(t *testing.T, s persistence.Store) {
	t.Helper()
	ps := s.(*Store)
	seq := ps.name("drover_test_fail_once")
	fn := ps.name("drover_test_fail")
	_, err := ps.pool.Exec(context.Background(), `
		CREATE SEQUENCE `+seq+`;
		CREATE FUNCTION `+fn+`() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF nextval('`+seq+`') = 1 THEN
				RAISE EXCEPTION 'injected failure in the middle of a transaction';
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER drover_test_fail BEFORE INSERT OR UPDATE ON `+ps.name("drover_checkpoints")+`
			FOR EACH ROW EXECUTE FUNCTION `+fn+`();`)
	if err != nil {
		t.Fatalf("install the failing trigger: %v", err)
	}
}

func TestConformance(t *testing.T) {
	storetest.Run(t, harness(Config{}))
}

func TestConformanceInSchema(t *testing.T) {
	storetest.Run(t, harness(Config{Schema: "drover_conf"}))
}

// Issue 10 item 7, on PostgreSQL: the test adds the CHECK constraint
// (doc->>'bad' IS NULL) to a records table drover made; the records of a
// batch that violate it are dead-lettered with the server's message
// (SQLSTATE 23514), alone, the rest of the batch applied, the checkpoint
// at the last message. In handler mode a Put the constraint refuses,
// returned by the handler, is handled the same way.
func TestRefusedRecordsDeadLettered(t *testing.T) {
	storetest.RunRefused(t, storetest.Refusal{
		Seed: 52,
		Store: func(t *testing.T) (func(*testkit.Clock) (persistence.Store, error), func(*testing.T, *testkit.Cluster)) {
			url := pg.URL(t)
			var store *Store
			open := func(*testkit.Clock) (persistence.Store, error) {
				s, err := Open(context.Background(), url, Config{})
				store = s
				return s, err
			}
			// a first message makes the table; then the constraint
			constrain := func(t *testing.T, c *testkit.Cluster) {
				if _, err := c.Publish("orders", "0", storetest.RefusedDocs(1, "first")...); err != nil {
					t.Fatal(err)
				}
				if !c.Settle(time.Minute) {
					t.Fatal("the first message did not settle")
				}
				if _, err := store.pool.Exec(context.Background(), `ALTER TABLE `+store.name("orders")+
					` ADD CONSTRAINT no_bad CHECK (doc->>'bad' IS NULL)`); err != nil {
					t.Fatalf("add the constraint: %v", err)
				}
			}
			return open, constrain
		},
		Records: 28,
		Reason:  `violates check constraint "no_bad" (SQLSTATE 23514)`,
	})
}
