package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/drover-dev/drover/persistence"
)

// Store is a persistence.Store on a PostgreSQL connection pool. Create it
// with Open; it is safe for concurrent use.
type Store struct {
	pool    *pgxpool.Pool
	log     *slog.Logger
	schema  string        // every table lives in this schema
	timeout time.Duration // bounds every call (Config.Timeout)
	sql     statements
	// readOnly: Config.ReadOnly; every session refuses writes
	readOnly bool

	mu     sync.Mutex             // guards tables
	tables map[string]*recordsSQL // records tables known to exist
}

var _ persistence.Store = (*Store)(nil)

// Open connects to the database at url (a postgres:// or postgresql:// URL
// or a libpq key=value string), runs the embedded migrations and returns
// the Store. It fails with an error wrapping persistence.ErrSchemaTooNew
// when the database was migrated by a newer drover.
func Open(ctx context.Context, url string, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		// The driver's message may quote the URL, password included.
		return nil, fmt.Errorf("open postgres store: cannot parse the URL (want postgres://user@host:port/db)")
	}
	return open(ctx, pc, cfg)
}

// open is Open after parsing; tests give it a pool config with a tracer.
func open(ctx context.Context, pc *pgxpool.Config, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	if cfg.MaxConns > 0 {
		pc.MaxConns = cfg.MaxConns
	}
	if pc.ConnConfig.RuntimeParams == nil {
		pc.ConnConfig.RuntimeParams = make(map[string]string)
	}
	for k, v := range sessionParams(cfg.timeout()) {
		if _, set := pc.ConnConfig.RuntimeParams[k]; !set {
			pc.ConnConfig.RuntimeParams[k] = v
		}
	}
	if cfg.ReadOnly {
		pc.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout())
	defer cancel()
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, wrapf(err, "open postgres store")
	}
	s := &Store{
		pool:     pool,
		log:      log,
		schema:   cfg.Schema,
		readOnly: cfg.ReadOnly,
		timeout:  cfg.timeout(),
		tables:   make(map[string]*recordsSQL),
	}
	if err := s.setup(ctx, cfg.Schema != ""); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	return s, nil
}

// setup settles the schema and migrates it.
func (s *Store) setup(ctx context.Context, createSchema bool) error {
	if s.schema == "" {
		// Qualify every name with the schema the search_path gives now,
		// so that no later statement depends on the search_path.
		var cur *string
		if err := s.pool.QueryRow(ctx, "SELECT current_schema()").Scan(&cur); err != nil {
			return wrapf(err, "connect")
		}
		if cur == nil {
			return fmt.Errorf("the search_path names no existing schema: set Config.Schema")
		}
		s.schema = *cur
	}
	s.sql = newStatements(s.name)
	if s.readOnly {
		return s.checkVersion(ctx)
	}
	return s.migrate(ctx, createSchema)
}

// Close closes the pool, waiting for connections in use to be returned.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// bound gives one call of the Store its deadline: Config.Timeout from now,
// or ctx's own when that is earlier.
func (s *Store) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.timeout)
}

// name returns the quoted, schema-qualified name of a table.
func (s *Store) name(table string) string {
	return pgx.Identifier{s.schema, table}.Sanitize()
}

// lockKey is the text whose hash (hashtext) names the advisory lock that
// serialises one kind of DDL on one object of this store's schema.
func (s *Store) lockKey(what, object string) string {
	return "drover." + what + ":" + s.schema + "." + object
}
