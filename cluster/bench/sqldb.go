package bench

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "modernc.org/sqlite" // database/sql driver "sqlite"
)

// db is the store as the ceiling and the loop write it: plain SQL against
// the tables drover uses (the records table's shape and the checkpoint
// row are copied from persistence/postgres and persistence/sqlite; keep
// them in step).
type db interface {
	// workers is how many writers may call write at once.
	workers() int
	// reset drops the records tables named as the sources and deletes the
	// sources' drover_ rows (checkpoints, leases, discovered units).
	reset(ctx context.Context, sources []string) error
	// create makes an empty records table.
	create(ctx context.Context, table string) error
	// write upserts one folded batch into table (a document equal to the
	// stored one is left alone: drover's stores skip it too, SQLite's by
	// reading the stored documents first, which the ceiling, as the issue
	// defines it, does in the upsert's WHERE instead) and writes the
	// unit's checkpoint, in one transaction.
	write(ctx context.Context, table, source string, b *sqlBatch) error
	count(ctx context.Context, table string) (int, error)
	close()
}

func openDB(ctx context.Context, storeURL string, workers int) (db, error) {
	if path, ok := strings.CutPrefix(storeURL, "sqlite:"); ok {
		return openSQLite(ctx, path)
	}
	cfg, err := pgxpool.ParseConfig(storeURL)
	if err != nil {
		return nil, fmt.Errorf("store URL: %w", err)
	}
	cfg.MaxConns = int32(workers)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to postgres: %w", err)
	}
	return &pgDB{pool: pool, n: workers}, nil
}

// pgDB: each batch is one pipelined round trip, [upsert FROM unnest,
// checkpoint], in one implicit transaction, as drover's stream batches
// are (without drover's fence).
type pgDB struct {
	pool *pgxpool.Pool
	n    int
}

func (d *pgDB) workers() int { return d.n }

func (d *pgDB) reset(ctx context.Context, sources []string) error {
	for _, s := range sources {
		if _, err := d.pool.Exec(ctx, `DROP TABLE IF EXISTS `+quote(s)); err != nil {
			return fmt.Errorf("drop %s: %w", s, err)
		}
	}
	for _, q := range []string{
		`DELETE FROM drover_checkpoints WHERE source = ANY ($1)`,
		`DELETE FROM drover_leases WHERE split_part(unit, '/', 1) = ANY ($1)`,
		`DELETE FROM drover_sources WHERE source = ANY ($1)`,
	} {
		if _, err := d.pool.Exec(ctx, q, sources); err != nil {
			return fmt.Errorf("reset bench rows: %w", err)
		}
	}
	return nil
}

func (d *pgDB) create(ctx context.Context, table string) error {
	_, err := d.pool.Exec(ctx, `CREATE TABLE `+quote(table)+` (
		key        text COLLATE "C" PRIMARY KEY,
		doc        jsonb NOT NULL,
		source     text NOT NULL,
		unit       text NOT NULL,
		position   text NOT NULL,
		updated_at timestamptz NOT NULL)`)
	if err != nil {
		return fmt.Errorf("create %s: %w", table, err)
	}
	// connect every worker's connection before a clock starts
	conns := make([]*pgxpool.Conn, 0, d.n)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for range d.n {
		c, err := d.pool.Acquire(ctx)
		if err != nil {
			return fmt.Errorf("connect to postgres: %w", err)
		}
		conns = append(conns, c)
	}
	return nil
}

const pgCheckpoint = `INSERT INTO drover_checkpoints AS c (unit, source, position, token, finished, updated_at)
	VALUES ($1, $2, $3, 1, false, now())
	ON CONFLICT (unit) DO UPDATE SET position = excluded.position, source = excluded.source,
		token = excluded.token, updated_at = excluded.updated_at`

func (d *pgDB) write(ctx context.Context, table, source string, b *sqlBatch) error {
	q := &pgx.Batch{}
	q.Queue(`INSERT INTO `+quote(table)+` AS t (key, doc, source, unit, position, updated_at)
		SELECT u.key, u.doc::jsonb, $4, $5, u.position, now()
		FROM unnest($1::text[], $2::text[], $3::text[]) AS u(key, doc, position)
		ON CONFLICT (key) DO UPDATE SET doc = excluded.doc, source = excluded.source, unit = excluded.unit,
			position = excluded.position, updated_at = excluded.updated_at
		WHERE t.doc IS DISTINCT FROM excluded.doc`, b.keys, b.docs, b.positions, source, b.unit)
	q.Queue(pgCheckpoint, b.unit, source, b.checkpoint)
	if err := d.pool.SendBatch(ctx, q).Close(); err != nil {
		return fmt.Errorf("write %s: %w", b.unit, err)
	}
	return nil
}

func (d *pgDB) count(ctx context.Context, table string) (int, error) {
	var n int
	err := d.pool.QueryRow(ctx, `SELECT count(*) FROM `+quote(table)).Scan(&n)
	return n, err
}

func (d *pgDB) close() { d.pool.Close() }

// sqliteDB: one connection with drover's pragmas; each batch one
// immediate transaction: a prepared upsert per row that skips an unchanged
// document, then the checkpoint.
type sqliteDB struct {
	db *sql.DB
	mu sync.Mutex
	up map[string]*sql.Stmt
	cp *sql.Stmt
}

func openSQLite(ctx context.Context, path string) (*sqliteDB, error) {
	// drover's connection pragmas (persistence/sqlite's open), but not its
	// WAL checkpointer: the ceiling is one connection, which checkpoints
	// as SQLite does by default, in its commits.
	dsn := fmt.Sprintf("file:%s?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"+
		"&_pragma=cache_size(-32768)&_pragma=temp_store(MEMORY)&_txlock=immediate", path)
	h, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	h.SetMaxOpenConns(1)
	h.SetMaxIdleConns(1)
	d := &sqliteDB{db: h, up: map[string]*sql.Stmt{}}
	d.cp, err = h.PrepareContext(ctx, `INSERT INTO drover_checkpoints (unit, source, position, finished, token, updated_at)
VALUES (?, ?, ?, 0, 1, ?)
ON CONFLICT (unit) DO UPDATE SET source = excluded.source, position = excluded.position,
	token = excluded.token, updated_at = excluded.updated_at`)
	if err != nil {
		_ = h.Close()
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	return d, nil
}

func (d *sqliteDB) workers() int { return 1 }

func (d *sqliteDB) reset(ctx context.Context, sources []string) error {
	for _, s := range sources {
		for _, q := range []struct {
			sql  string
			args []any
		}{
			{`DROP TABLE IF EXISTS ` + quote(s), nil},
			{`DELETE FROM drover_checkpoints WHERE source = ?`, []any{s}},
			{`DELETE FROM drover_leases WHERE unit LIKE ? ESCAPE '\'`, []any{strings.ReplaceAll(s, "_", `\_`) + "/%"}},
			{`DELETE FROM drover_sources WHERE source = ?`, []any{s}},
		} {
			if _, err := d.db.ExecContext(ctx, q.sql, q.args...); err != nil {
				return fmt.Errorf("reset bench rows: %w", err)
			}
		}
	}
	return nil
}

func (d *sqliteDB) create(ctx context.Context, table string) error {
	_, err := d.db.ExecContext(ctx, `CREATE TABLE `+quote(table)+` (
	key        TEXT    PRIMARY KEY,
	doc        TEXT    NOT NULL,
	source     TEXT    NOT NULL,
	unit       TEXT    NOT NULL,
	position   TEXT    NOT NULL,
	updated_at INTEGER NOT NULL
) WITHOUT ROWID`)
	if err != nil {
		return fmt.Errorf("create %s: %w", table, err)
	}
	st, err := d.db.PrepareContext(ctx, `INSERT INTO `+quote(table)+` (key, doc, source, unit, position, updated_at)
VALUES (?, json(?), ?, ?, ?, ?)
ON CONFLICT (key) DO UPDATE SET doc = excluded.doc, source = excluded.source, unit = excluded.unit,
	position = excluded.position, updated_at = excluded.updated_at
WHERE doc IS NOT excluded.doc`)
	if err != nil {
		return fmt.Errorf("prepare %s: %w", table, err)
	}
	d.mu.Lock()
	d.up[table] = st
	d.mu.Unlock()
	return nil
}

func (d *sqliteDB) write(ctx context.Context, table, source string, b *sqlBatch) (err error) {
	d.mu.Lock()
	up := d.up[table]
	d.mu.Unlock()
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	now := time.Now().UnixNano()
	u := tx.StmtContext(ctx, up)
	for i, k := range b.keys {
		if _, err = u.ExecContext(ctx, k, b.docs[i], source, b.unit, b.positions[i], now); err != nil {
			return fmt.Errorf("write %s: %w", b.unit, err)
		}
	}
	if _, err = tx.StmtContext(ctx, d.cp).ExecContext(ctx, b.unit, source, b.checkpoint, now); err != nil {
		return fmt.Errorf("write %s: %w", b.unit, err)
	}
	return tx.Commit()
}

func (d *sqliteDB) count(ctx context.Context, table string) (int, error) {
	var n int
	err := d.db.QueryRowContext(ctx, `SELECT count(*) FROM `+quote(table)).Scan(&n)
	return n, err
}

func (d *sqliteDB) close() {
	d.mu.Lock()
	for _, st := range d.up {
		_ = st.Close()
	}
	d.mu.Unlock()
	_ = d.cp.Close()
	_ = d.db.Close()
}

// quote quotes a bench table name (bench_*, lower case letters, digits
// and underscores).
func quote(table string) string { return `"` + table + `"` }
