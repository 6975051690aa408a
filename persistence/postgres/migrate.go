package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/drover-dev/drover/persistence"
)

// Migrations are numbered SQL files, NNNN_name.sql, applied in order, each
// once, inside one transaction per Open; drover_migrations records the
// versions applied. They are written without schema names: the runner sets
// the search_path to the store's schema for their transaction.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the embedded migrations by version, checking that the
// versions run 1, 2, 3, ... without gaps.
func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || !strings.HasSuffix(e.Name(), ".sql") {
			return nil, fmt.Errorf("migration %s: want NNNN_name.sql", e.Name())
		}
		b, err := migrationFiles.ReadFile(path.Join("migrations", e.Name()))
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: e.Name(), sql: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %s: version %d, want %d", m.name, m.version, i+1)
		}
	}
	return ms, nil
}

// SchemaVersion is the newest schema version this binary knows.
func SchemaVersion() int {
	ms, err := migrations()
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].version
}

// migrate brings the schema to the newest version. Concurrent openers
// serialise on a transaction-scoped advisory lock, so each migration runs
// once; a database newer than this binary is refused.
func (s *Store) migrate(ctx context.Context, createSchema bool) error {
	ms, err := migrations()
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	latest := ms[len(ms)-1].version
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return wrapf(err, "migrate: begin")
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	cur, err := s.migrationStart(ctx, tx, createSchema)
	if err != nil {
		return err
	}
	if cur > latest {
		return fmt.Errorf("migrate schema %s: the database is at version %d, this drover knows up to version %d: %w",
			s.schema, cur, latest, persistence.ErrSchemaTooNew)
	}
	if cur == latest {
		return nil // nothing to write: leave the transaction read-only
	}
	// Migrations name no schema; point them at ours.
	if _, err := tx.Exec(ctx, "SET LOCAL search_path TO "+pgx.Identifier{s.schema}.Sanitize()); err != nil {
		return wrapf(err, "migrate: set search_path")
	}
	for _, m := range ms[cur:] {
		if _, err := tx.Exec(ctx, m.sql); err != nil {
			return wrapf(err, "migrate %s", m.name)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO "+s.name("drover_migrations")+" (version, name) VALUES ($1, $2)",
			m.version, m.name); err != nil {
			return wrapf(err, "migrate %s: record version", m.name)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return wrapf(err, "migrate: commit")
	}
	s.log.Info("migrated drover schema", "schema", s.schema, "from", cur, "to", latest)
	return nil
}

// checkVersion is what a read-only Open does instead of migrating: the
// schema must hold drover's tables at exactly this drover's version.
func (s *Store) checkVersion(ctx context.Context) error {
	ms, err := migrations()
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	latest := ms[len(ms)-1].version
	var hasTable bool
	if err := s.pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", s.name("drover_migrations")).Scan(&hasTable); err != nil {
		return wrapf(err, "read catalog")
	}
	if !hasTable {
		return fmt.Errorf("schema %s holds no drover tables (opened read-only: nothing is created)", s.schema)
	}
	var cur int
	if err := s.pool.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM "+s.name("drover_migrations")).Scan(&cur); err != nil {
		return wrapf(err, "read schema version")
	}
	switch {
	case cur > latest:
		return fmt.Errorf("schema %s: the database is at version %d, this drover knows up to version %d: %w",
			s.schema, cur, latest, persistence.ErrSchemaTooNew)
	case cur < latest:
		return fmt.Errorf("schema %s is at version %d, this drover reads version %d: a node of this version migrates it on start (opened read-only: nothing is migrated)",
			s.schema, cur, latest)
	}
	return nil
}

// migrationStart takes the migration lock of the schema, creates the
// schema and the version table when missing, and returns the version the
// database is at. It creates nothing that exists already, so an up-to-date
// database opens without CREATE privileges.
func (s *Store) migrationStart(ctx context.Context, tx pgx.Tx, createSchema bool) (int, error) {
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext($1))", s.lockKey("migrate", "")); err != nil {
		return 0, wrapf(err, "migrate: lock")
	}
	var hasSchema, hasTable bool
	if err := tx.QueryRow(ctx,
		"SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1), to_regclass($2) IS NOT NULL",
		s.schema, s.name("drover_migrations")).Scan(&hasSchema, &hasTable); err != nil {
		return 0, wrapf(err, "migrate: read catalog")
	}
	if !hasSchema {
		if !createSchema {
			return 0, fmt.Errorf("migrate: schema %s does not exist", s.schema)
		}
		if _, err := tx.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{s.schema}.Sanitize()); err != nil {
			return 0, wrapf(err, "migrate: create schema %s", s.schema)
		}
	}
	if !hasTable {
		if _, err := tx.Exec(ctx, `CREATE TABLE `+s.name("drover_migrations")+` (
			version    integer PRIMARY KEY,
			name       text NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now()
		)`); err != nil {
			return 0, wrapf(err, "migrate: create drover_migrations")
		}
		return 0, nil
	}
	var cur int
	if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM "+s.name("drover_migrations")).Scan(&cur); err != nil {
		return 0, wrapf(err, "migrate: read version")
	}
	return cur, nil
}
