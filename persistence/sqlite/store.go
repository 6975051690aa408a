package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/maphash"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/drover-dev/drover/internal/clock"
	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/persistence/internal/sqlstore"
)

// Config configures a Store. The zero value is ready to use.
type Config struct {
	// Clock is the store's clock: it judges lease expiry and stamps every
	// write. nil means clock.Real{}. Processes sharing one file should all
	// use the machine's clock.
	Clock clock.Clock
	// Timeout bounds every call of the Store, Open included (a ctx with
	// an earlier deadline is kept), and is the busy_timeout: how long a
	// statement waits for another process's write lock. 0: DefaultTimeout.
	// A handler batch's Handle runs within its Apply's bound.
	Timeout time.Duration
	// Logger receives migration notices. nil discards them.
	Logger *slog.Logger
	// MustExist refuses a file that does not exist instead of creating
	// one (SQLite's mode=rw): a tool given a mistyped path must not create
	// and migrate a new, empty store there. The error wraps fs.ErrNotExist.
	MustExist bool
	// ReadOnly opens an existing file read-only (SQLite's mode=ro, and
	// MustExist): nothing is created or migrated, and every write fails.
	// The file must hold drover's schema at this build's version: an older
	// one is refused (a read-write Open migrates it), a newer one with
	// persistence.ErrSchemaTooNew.
	ReadOnly bool
}

// DefaultTimeout is the default of Config.Timeout: the busy_timeout of
// before (10 s), far above any transaction of a healthy store.
const DefaultTimeout = 10 * time.Second

// MinTimeout is the shortest Config.Timeout accepted.
const MinTimeout = 10 * time.Millisecond

// Validate reports the first invalid field.
func (c Config) Validate() error {
	return sqlstore.CheckTimeout(c.Timeout, MinTimeout, DefaultTimeout)
}

func (c Config) timeout() time.Duration { return sqlstore.Timeout(c.Timeout, DefaultTimeout) }

// Store is a persistence.Store on one SQLite file. Create it with Open.
type Store struct {
	db      *sql.DB
	path    string
	ro      bool // Config.ReadOnly
	mustEx  bool // Config.MustExist or ReadOnly
	clock   clock.Clock
	log     *slog.Logger
	timeout time.Duration // bounds every call (Config.Timeout)
	stmts   statements
	ckpt    *checkpointer // nil when ReadOnly

	mu     sync.Mutex             // guards tables
	tables map[string]*tableStmts // records tables known to exist

	checkedMu sync.Mutex
	checked   map[string]renewCheck // owner -> what its last renewal round found (renew.go)
	fpSeed    maphash.Seed          // of the renewal rounds' fingerprints (renew.go)

	// failAfterWrites > 0 makes Apply fail after that many more rows
	// written (a test hook; see export_test.go and wrote).
	failAfterWrites atomic.Int64
	// groupTxs counts the transactions ApplyGroup's groups without
	// handlers began (tests: a store-wide error must not run a group
	// once per batch).
	groupTxs atomic.Int64
}

var _ persistence.Store = (*Store)(nil)

// Open opens (creating if needed, unless Config.MustExist or ReadOnly) the
// database file at path and migrates it (unless ReadOnly). path is a file path or a store URL of the form sqlite:PATH or
// sqlite://PATH. It fails with an error wrapping
// persistence.ErrSchemaTooNew when the file was migrated by a newer drover.
//
// Processes that open one fresh file at once contend for it: the first
// connection's switch to WAL can fail with SQLITE_BUSY at once, without
// waiting for busy_timeout, while another process switches or migrates.
// Open then closes what it opened and tries again, backing off from 5 ms to
// 200 ms, until Config.Timeout (or ctx) runs out.
func Open(ctx context.Context, path string, cfg Config) (*Store, error) {
	path = strings.TrimPrefix(path, "sqlite:")
	path = strings.TrimPrefix(path, "//")
	if path == "" || strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("open sqlite store %q: want a file path without '?' or '#'", path)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("open sqlite store %s: %w", path, err)
	}
	s := &Store{
		path:    path,
		ro:      cfg.ReadOnly,
		mustEx:  cfg.MustExist || cfg.ReadOnly,
		clock:   cfg.Clock,
		log:     cfg.Logger,
		timeout: cfg.timeout(),
		tables:  make(map[string]*tableStmts),
		checked: make(map[string]renewCheck),
		fpSeed:  maphash.MakeSeed(),
	}
	if s.clock == nil {
		s.clock = clock.Real{}
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.mustEx {
		if err := mustExist(path); err != nil {
			return nil, err
		}
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	backoff := 5 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := s.open(ctx)
		if err == nil {
			return s, nil
		}
		if !busy(err) {
			return nil, fmt.Errorf("open sqlite store %s: %w", path, err)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("open sqlite store %s: still locked by another process after %d attempts: %w", path, attempt, err)
		case <-t.C:
		}
		backoff = min(2*backoff, 200*time.Millisecond)
	}
}

// open is one attempt of Open: connect (the DSN's pragmas run on the first
// connection), migrate, prepare. On error it closes what it opened.
func (s *Store) open(ctx context.Context) error {
	// WAL lets readers run beside the one writer; busy_timeout makes a
	// writer wait for another process's transaction instead of failing;
	// _txlock=immediate takes the write lock at BEGIN, so that a
	// transaction never has to upgrade a read lock (which fails at once
	// with SQLITE_BUSY whatever the timeout when another process wrote).
	//
	// cache_size: 32 MiB of page cache (SQLite's default is 2 MiB), so that
	// a group commit's pages stay in memory instead of spilling to the WAL
	// before the commit and being read back. temp_store(MEMORY) keeps the
	// sub-journal of ApplyGroup's savepoints in memory (by default it goes
	// to a temporary file past 64 KiB). wal_autocheckpoint: checkpoints run
	// off the commit path (walcheckpoint.go); the writer's own is a
	// backstop.
	dsn := fmt.Sprintf("file:%s?_pragma=busy_timeout(%d)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"+
		"&_pragma=cache_size(-32768)&_pragma=temp_store(MEMORY)&_pragma=wal_autocheckpoint(%d)&_txlock=immediate",
		s.path, max(s.timeout.Milliseconds(), 1), walBackstopPages)
	switch {
	case s.ro:
		// No journal_mode (a write) and no immediate transactions (they
		// take the write lock): a read-only connection reads the WAL the
		// writers keep.
		dsn = fmt.Sprintf("file:%s?mode=ro&_pragma=busy_timeout(%d)", s.path, max(s.timeout.Milliseconds(), 1))
	case s.mustEx:
		dsn += "&mode=rw" // open read-write, never create
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return dbErr(err)
	}
	// One connection: the process's writes queue in database/sql instead
	// of contending for SQLite's lock, and a transaction never waits for
	// another connection of its own process.
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return fmt.Errorf("connect: %w", dbErr(err))
	}
	var from, to int
	if s.ro {
		from, err = readSchema(ctx, db)
		to = from
	} else {
		from, to, err = migrate(ctx, db)
	}
	if err != nil {
		_ = db.Close()
		return err
	}
	if from != to {
		s.log.Info("sqlite store migrated", "path", s.path, "from", from, "to", to)
	}
	if err := s.stmts.prepare(ctx, db); err != nil {
		_ = db.Close()
		s.stmts = statements{}
		return err
	}
	if !s.ro {
		if s.ckpt, err = startCheckpointer(ctx, s.path, s.timeout, s.log, db); err != nil {
			s.stmts.close()
			s.stmts = statements{}
			_ = db.Close()
			return err
		}
	}
	s.db = db
	return nil
}

// mustExist fails, wrapping fs.ErrNotExist, unless path is an existing
// file.
func mustExist(path string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("open sqlite store %s: no such file (an existing store was asked for; none is created): %w", path, fs.ErrNotExist)
	case err != nil:
		return fmt.Errorf("open sqlite store %s: %w", path, err)
	case fi.IsDir():
		return fmt.Errorf("open sqlite store %s: a directory, not a database file", path)
	}
	return nil
}

// bound gives one call of the Store its deadline: Config.Timeout from now,
// or ctx's own when that is earlier.
func (s *Store) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.timeout)
}

// Path is the database file's path.
func (s *Store) Path() string { return s.path }

// Close closes the database. Calls after Close fail.
func (s *Store) Close() error {
	s.mu.Lock()
	for _, t := range s.tables {
		t.close()
	}
	s.tables = map[string]*tableStmts{}
	s.mu.Unlock()
	s.stmts.close()
	if s.ckpt != nil {
		if err := s.ckpt.close(); err != nil {
			_ = s.db.Close()
			return fmt.Errorf("close sqlite store %s: checkpointer: %w", s.path, dbErr(err))
		}
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close sqlite store %s: %w", s.path, dbErr(err))
	}
	return nil
}

// now is the store clock's time, as stored: unix nanoseconds.
func (s *Store) now() int64 { return s.clock.Now().UnixNano() }

// fromNanos turns a stored time back into a UTC time.Time.
func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

// dbError is a SQLite failure, translated so that no driver type leaves the
// package.
type dbError struct {
	code int
	msg  string
}

func (e *dbError) Error() string { return "sqlite: " + e.msg }

// Is makes SQLITE_BUSY and SQLITE_LOCKED (after busy_timeout) match
// persistence.ErrBusy, and the refusals of what a statement writes
// (Permanent) match persistence.ErrPermanent.
func (e *dbError) Is(target error) bool {
	switch target {
	case persistence.ErrBusy:
		return e.Temporary()
	case persistence.ErrPermanent:
		return e.Permanent()
	}
	return false
}

// Permanent reports whether SQLite refused the values a statement writes,
// so that the same statement fails again however often it runs: a
// constraint (CHECK, NOT NULL, UNIQUE, FOREIGN KEY: SQLITE_CONSTRAINT, any
// extended code), a datatype mismatch (SQLITE_MISMATCH) or a value over
// SQLITE_MAX_LENGTH (SQLITE_TOOBIG). Everything else — BUSY and LOCKED
// above all — may succeed later.
func (e *dbError) Permanent() bool {
	switch e.code & 0xff {
	case sqlite3.SQLITE_CONSTRAINT, sqlite3.SQLITE_MISMATCH, sqlite3.SQLITE_TOOBIG:
		return true
	}
	return false
}

// Temporary reports whether the same call may succeed later: the database
// was locked by another process for longer than busy_timeout.
func (e *dbError) Temporary() bool {
	switch e.code & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return true
	}
	return false
}

// busy reports whether err is SQLite's "database is locked" (SQLITE_BUSY
// or SQLITE_LOCKED, any extended code).
func busy(err error) bool {
	var e *dbError
	if errors.As(err, &e) {
		return e.Temporary()
	}
	var se *msqlite.Error
	if errors.As(err, &se) {
		return (&dbError{code: se.Code()}).Temporary()
	}
	return false
}

// dbErr translates the driver's errors at the package boundary. Errors that
// are not the driver's (context errors, database/sql's) pass unchanged.
func dbErr(err error) error {
	var se *msqlite.Error
	if errors.As(err, &se) {
		return &dbError{code: se.Code(), msg: se.Error()}
	}
	return err
}

// statements are the prepared statements of drover's own tables.
type statements struct {
	leaseGet, leasePut, leaseRenew, leaseRenewMany      *sql.Stmt
	leaseRelease, leaseList, leaseHeld                  *sql.Stmt
	nodeBeat, nodeChanged, ownerCount                   *sql.Stmt
	sourcePut, sourceGet                                *sql.Stmt
	fence                                               *sql.Stmt
	dedupeGet, dedupePut                                *sql.Stmt
	deadLetterPut                                       *sql.Stmt
	checkpointGet, checkpointPut, checkpointReset       *sql.Stmt
	checkpointMove, checkpointMoveSource, checkpointsOf *sql.Stmt
}

func (st *statements) prepare(ctx context.Context, db *sql.DB) error {
	for _, p := range []struct {
		to  **sql.Stmt
		sql string
	}{
		// renewed_at as reported: the later of the row's and its owner's
		// heartbeat (persistence.Lease.RenewedAt).
		{&st.leaseGet, `SELECT owner, token, expires_at, acquired_at, ` + seenRenewedAt + ` FROM drover_leases l WHERE unit = ?`},
		{&st.leasePut, `INSERT INTO drover_leases (unit, owner, token, expires_at, acquired_at, renewed_at) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (unit) DO UPDATE SET owner = excluded.owner, token = excluded.token,
	expires_at = excluded.expires_at, acquired_at = excluded.acquired_at, renewed_at = excluded.renewed_at`},
		{&st.leaseRenew, `UPDATE drover_leases SET expires_at = ?, renewed_at = ?
WHERE unit = ? AND owner = ? AND owner <> '' AND token = ?
RETURNING owner, token, expires_at, acquired_at, renewed_at`},
		{&st.leaseRenewMany, sqlRenewMany},
		// prepared: the bench's latency poller and the debug views read
		// them every few milliseconds, and parsing it was a third of a read
		{&st.checkpointsOf, `SELECT unit, source, position, finished, token, updated_at, stream_id
FROM drover_checkpoints WHERE source = ? ORDER BY unit`},
		{&st.leaseHeld, sqlLeaseHeld},
		{&st.nodeBeat, `INSERT INTO drover_nodes (node, heartbeat_at) VALUES (?1, ?2)
ON CONFLICT (node) DO UPDATE SET heartbeat_at = max(heartbeat_at, excluded.heartbeat_at)
RETURNING lease_changes`},
		// An owner's lease row written by someone else's Acquire, or by its
		// own Renew or Release.
		{&st.nodeChanged, `UPDATE drover_nodes SET lease_changes = lease_changes + 1 WHERE node = ?`},
		{&st.ownerCount, `SELECT count(*) FROM drover_leases WHERE owner = ?`},
		{&st.sourcePut, `INSERT INTO drover_sources (source, units, created_at) VALUES (?, ?, ?)
ON CONFLICT (source) DO NOTHING`},
		{&st.sourceGet, `SELECT units FROM drover_sources WHERE source = ?`},
		{&st.leaseRelease, `UPDATE drover_leases SET owner = '', expires_at = ?
WHERE unit = ? AND owner = ? AND owner <> '' AND token = ?`},
		{&st.leaseList, `SELECT unit, owner, token, expires_at, acquired_at, ` + seenRenewedAt + ` FROM drover_leases l ORDER BY unit`},
		{&st.fence, `SELECT token FROM drover_leases WHERE unit = ?`},
		{&st.dedupeGet, `SELECT message_id FROM drover_dedupe
WHERE source = ? AND message_id IN (SELECT value FROM json_each(?))`},
		{&st.dedupePut, `INSERT INTO drover_dedupe (source, message_id, applied_at)
SELECT ?, value, ? FROM json_each(?)`},
		{&st.deadLetterPut, `INSERT INTO drover_dead_letters
	(source, unit, position, msg_key, payload, reason, attempts, status, first_failed_at, last_failed_at, payload_bytes)
VALUES (?, ?, ?, ?, ?, ?, 1, 'pending', ?, ?, ?)
ON CONFLICT (source, unit, position) DO UPDATE SET
	attempts = attempts + 1, last_failed_at = excluded.last_failed_at, msg_key = excluded.msg_key,
	payload = excluded.payload, payload_bytes = excluded.payload_bytes, reason = excluded.reason, status = 'pending'`},
		{&st.checkpointGet, `SELECT position, finished FROM drover_checkpoints WHERE unit = ?`},
		{&st.checkpointPut, `INSERT INTO drover_checkpoints (unit, source, position, finished, token, updated_at)
VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (unit) DO UPDATE SET source = excluded.source, position = excluded.position,
	finished = excluded.finished, token = excluded.token, updated_at = excluded.updated_at`},
		// checkpointMove moves a checkpoint forward only: to a later
		// position, or to the same one newly finished (moveCheckpoint).
		// Its update leaves source alone: a column in the SET list has
		// SQLite rewrite the index entries on it whatever the value, so
		// "source = excluded.source" put drover_checkpoints_source's page
		// in the WAL with every commit. A stored row of another source
		// (the unit's name reused) is moved by checkpointMoveSource.
		{&st.checkpointMove, `INSERT INTO drover_checkpoints (unit, source, position, finished, token, updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6)
ON CONFLICT (unit) DO UPDATE SET position = excluded.position,
	finished = (drover_checkpoints.finished OR excluded.finished), token = excluded.token, updated_at = excluded.updated_at
WHERE drover_checkpoints.source = excluded.source
	AND (` + positionCmpFunc + `(excluded.position, drover_checkpoints.position) > 0
		OR (` + positionCmpFunc + `(excluded.position, drover_checkpoints.position) = 0
			AND excluded.finished AND NOT drover_checkpoints.finished))`},
		{&st.checkpointMoveSource, `UPDATE drover_checkpoints SET source = ?2, position = ?3,
	finished = (finished OR ?4), token = ?5, updated_at = ?6
WHERE unit = ?1 AND source <> ?2 AND (` + positionCmpFunc + `(?3, position) > 0
	OR (` + positionCmpFunc + `(?3, position) = 0 AND ?4 AND NOT finished))`},
		{&st.checkpointReset, `INSERT INTO drover_checkpoints (unit, source, position, finished, token, updated_at, stream_id)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (unit) DO UPDATE SET source = excluded.source, position = excluded.position,
	finished = excluded.finished, token = excluded.token, updated_at = excluded.updated_at,
	stream_id = CASE WHEN excluded.stream_id = '' THEN drover_checkpoints.stream_id ELSE excluded.stream_id END`},
	} {
		stmt, err := db.PrepareContext(ctx, p.sql)
		if err != nil {
			st.close()
			return fmt.Errorf("prepare %q: %w", firstLine(p.sql), dbErr(err))
		}
		*p.to = stmt
	}
	return nil
}

func (st *statements) close() {
	for _, s := range []*sql.Stmt{st.leaseGet, st.leasePut, st.leaseRenew, st.leaseRenewMany, st.leaseRelease, st.leaseList,
		st.leaseHeld, st.nodeBeat, st.nodeChanged, st.ownerCount,
		st.sourcePut, st.sourceGet,
		st.fence, st.dedupeGet, st.dedupePut, st.deadLetterPut, st.checkpointGet, st.checkpointPut,
		st.checkpointReset, st.checkpointMove, st.checkpointMoveSource, st.checkpointsOf} {
		if s != nil {
			_ = s.Close()
		}
	}
}

// sqlRenewMany extends every lease of a JSON object of unit: token pairs
// (leasePairs) that the owner holds with that token. +owner keeps the index on owner
// out of the plan: with it SQLite would scan the owner's rows and the
// whole list for each, not look each pair up by unit (TestRenewPlans).
const sqlRenewMany = `UPDATE drover_leases SET expires_at = ?1, renewed_at = ?2
FROM (SELECT key AS unit, value AS token FROM json_each(?4)) AS r
WHERE drover_leases.unit = r.unit AND drover_leases.token = r.token AND +owner = ?3 AND owner <> ''`

// sqlLeaseHeld reads the leases of the same pairs the owner holds with
// that token, as stored. CROSS JOIN keeps the list the outer loop (SQLite
// does not reorder it): one primary-key lookup per pair.
const sqlLeaseHeld = `SELECT l.unit, owner, l.token, expires_at, acquired_at, renewed_at
FROM (SELECT key AS unit, value AS token FROM json_each(?2)) AS r
CROSS JOIN drover_leases l ON l.unit = r.unit AND l.token = r.token
WHERE owner = ?1 AND owner <> ''`

// seenRenewedAt is the renewed_at of lease row l as reported: the later
// of its own and its owner's heartbeat.
const seenRenewedAt = `CASE WHEN l.owner = '' THEN l.renewed_at ELSE
	max(l.renewed_at, coalesce((SELECT heartbeat_at FROM drover_nodes WHERE node = l.owner), 0)) END`

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// tableStmts are the prepared statements of one records table.
type tableStmts struct {
	remove, get, page *sql.Stmt
	// upserts[i] upserts upsertRows[i] rows in one statement
	upserts [len(upsertRows)]*sql.Stmt
}

// upsertOne is the 1-row upsert (a handler's Put).
func (t *tableStmts) upsertOne() *sql.Stmt { return t.upserts[len(upsertRows)-1] }

// upsertRows are the row counts of a records table's upsert statements,
// largest first: a batch's upserts run 64 at a time (or 1 MiB of
// documents), and the rest as the fewest statements these counts add up
// to (37 rows: 32, 4 and 1). A statement per row cost about 2.5 us of
// database/sql and driver work per row beside SQLite's own.
var upsertRows = [...]int{64, 32, 16, 8, 4, 2, 1}

func (t *tableStmts) close() {
	for _, s := range append([]*sql.Stmt{t.remove, t.get, t.page}, t.upserts[:]...) {
		if s != nil {
			_ = s.Close()
		}
	}
}

// quote quotes a table name ValidTable accepted.
func quote(table string) string { return `"` + table + `"` }

func recordsTableSQL(table string) string {
	return `CREATE TABLE IF NOT EXISTS ` + quote(table) + ` (
	key        TEXT    PRIMARY KEY,
	doc        TEXT    NOT NULL, -- JSON
	source     TEXT    NOT NULL,
	unit       TEXT    NOT NULL,
	position   TEXT    NOT NULL,
	updated_at INTEGER NOT NULL
) WITHOUT ROWID`
}

// recordsSQL are the statements of a records table. The upsert stores the
// document as given: callers pass compactJSON's (what SQLite's json()
// would store) or a document the decoder wrote compact (DocChecked); it
// leaves a stored document that equals it untouched
// (sameJSONFunc), so that a row a statement did not change is an
// unchanged document.
func recordsSQL(table string) (upsert, remove, get, page string) {
	q := quote(table)
	upsert = upsertSQL(table, 1)
	remove = `DELETE FROM ` + q + ` WHERE key = ?`
	get = `SELECT doc FROM ` + q + ` WHERE key = ?`
	page = `SELECT key, doc, source, unit, position, updated_at FROM ` + q + ` WHERE key > ? ORDER BY key LIMIT ?`
	return
}

// upsertSQL is the records upsert of rows rows: the arguments are each
// row's key, doc, source, unit, position and updated_at in turn. A
// conflict (the key stored) updates the row unless drover_same_json finds
// the stored document equal to the new one; a row so left does not count
// in the statement's changes.
func upsertSQL(table string, rows int) string {
	var b strings.Builder
	b.WriteString(`INSERT INTO ` + quote(table) + ` (key, doc, source, unit, position, updated_at) VALUES `)
	for i := range rows {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?, ?, ?, ?)")
	}
	b.WriteString(`
ON CONFLICT (key) DO UPDATE SET doc = excluded.doc, source = excluded.source, unit = excluded.unit,
	position = excluded.position, updated_at = excluded.updated_at
WHERE NOT ` + sameJSONFunc + `(doc, excluded.doc)`)
	return b.String()
}

// table returns the statements of a records table, creating the table when
// it does not exist. It runs outside any transaction: an empty table left by
// a batch that then failed holds none of that batch's data.
func (s *Store) table(ctx context.Context, name string) (*tableStmts, error) {
	if err := persistence.ValidTable(name); err != nil {
		return nil, err
	}
	if t := s.knownTable(name); t != nil {
		return t, nil
	}
	// No lock while talking to the database: the one connection may be in
	// a transaction whose handler needs s.mu (knownTable).
	if _, err := s.db.ExecContext(ctx, recordsTableSQL(name)); err != nil {
		return nil, fmt.Errorf("create table %s: %w", name, dbErr(err))
	}
	t := &tableStmts{}
	_, rm, get, page := recordsSQL(name)
	type prep struct {
		to  **sql.Stmt
		sql string
	}
	preps := []prep{{&t.remove, rm}, {&t.get, get}, {&t.page, page}}
	for i, n := range upsertRows {
		preps = append(preps, prep{&t.upserts[i], upsertSQL(name, n)})
	}
	for _, p := range preps {
		stmt, err := s.db.PrepareContext(ctx, p.sql)
		if err != nil {
			t.close()
			return nil, fmt.Errorf("prepare %s: %w", name, dbErr(err))
		}
		*p.to = stmt
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if other, ok := s.tables[name]; ok {
		t.close()
		return other, nil
	}
	s.tables[name] = t
	return t, nil
}

// knownTable returns a records table's statements if the table is known to
// exist, without touching the database.
func (s *Store) knownTable(name string) *tableStmts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tables[name]
}

// wrote counts one row Apply wrote (an upserted or deleted record, a
// dead letter, a checkpoint) against the failAfterWrites test hook; the
// rows of a multi-row upsert count once their statement ran.
func (s *Store) wrote() error {
	for {
		n := s.failAfterWrites.Load()
		if n <= 0 {
			return nil
		}
		if s.failAfterWrites.CompareAndSwap(n, n-1) {
			if n == 1 {
				return fmt.Errorf("write: %w", persistence.ErrInjected)
			}
			return nil
		}
	}
}
