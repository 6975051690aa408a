package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/drover-dev/drover/persistence"
)

// migration is one step of the schema. Steps are append-only: a released
// step is never edited, a change is a new step.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the schema steps in version order. Records tables are
// not here: Apply creates them on first use (recordsTableSQL).
func migrations() []migration {
	return []migration{{
		version: 1,
		name:    "drover tables",
		sql: `
CREATE TABLE drover_leases (
	unit        TEXT    PRIMARY KEY,
	owner       TEXT    NOT NULL,
	token       INTEGER NOT NULL,
	expires_at  INTEGER NOT NULL, -- unix nanoseconds, UTC
	acquired_at INTEGER NOT NULL
);
CREATE TABLE drover_checkpoints (
	unit       TEXT    PRIMARY KEY,
	source     TEXT    NOT NULL,
	position   TEXT    NOT NULL,
	finished   INTEGER NOT NULL DEFAULT 0,
	token      INTEGER NOT NULL,
	updated_at INTEGER NOT NULL
);
CREATE INDEX drover_checkpoints_source ON drover_checkpoints (source, unit);
CREATE TABLE drover_dead_letters (
	id              INTEGER PRIMARY KEY AUTOINCREMENT,
	source          TEXT    NOT NULL,
	unit            TEXT    NOT NULL,
	position        TEXT    NOT NULL,
	msg_key         TEXT    NOT NULL,
	payload         BLOB,
	reason          TEXT    NOT NULL,
	attempts        INTEGER NOT NULL,
	status          TEXT    NOT NULL CHECK (status IN ('pending', 'replayed', 'resolved')),
	first_failed_at INTEGER NOT NULL,
	last_failed_at  INTEGER NOT NULL,
	UNIQUE (source, unit, position)
);
CREATE INDEX drover_dead_letters_status ON drover_dead_letters (status, id);
CREATE TABLE drover_dedupe (
	source     TEXT    NOT NULL,
	message_id TEXT    NOT NULL,
	applied_at INTEGER NOT NULL,
	PRIMARY KEY (source, message_id)
) WITHOUT ROWID;
CREATE INDEX drover_dedupe_applied_at ON drover_dedupe (applied_at);
CREATE TABLE drover_quality (
	id           INTEGER PRIMARY KEY AUTOINCREMENT,
	source       TEXT    NOT NULL,
	node         TEXT    NOT NULL,
	window_start INTEGER NOT NULL,
	window_end   INTEGER NOT NULL,
	rows_read    INTEGER NOT NULL,
	rows_failed  INTEGER NOT NULL,
	fields       TEXT    NOT NULL, -- JSON
	drift        TEXT    NOT NULL, -- JSON
	status       TEXT    NOT NULL
);
CREATE INDEX drover_quality_source ON drover_quality (source, id);
`,
	}, {
		version: 2,
		name:    "lease renewals and the initial units of a source",
		// renewed_at is the store clock's time of a lease's last Acquire or
		// renewal (AcquireRequest.Stale). Rows that exist when this step
		// runs get their acquired_at: the one moment their holder is known
		// to have reached the store. Their holders are drover processes
		// older than this step, whose renewals do not write renewed_at, so
		// they are judged by the takeover rule of before.
		sql: `
ALTER TABLE drover_leases ADD COLUMN renewed_at INTEGER NOT NULL DEFAULT 0; -- unix nanoseconds, UTC
UPDATE drover_leases SET renewed_at = acquired_at;
CREATE TABLE drover_sources (
	source     TEXT    PRIMARY KEY,
	units      TEXT    NOT NULL, -- JSON array of unit names, sorted
	created_at INTEGER NOT NULL
);
`,
	}, {
		version: 3,
		name:    "the size of a dead letter's message",
		// Dead-letter payloads are cut at dead_letter_max_bytes:
		// payload_bytes is the size of the message body, so a row whose
		// payload is shorter holds only its first bytes (replay refuses
		// it). Rows written before this step hold their whole body.
		sql: `
ALTER TABLE drover_dead_letters ADD COLUMN payload_bytes INTEGER NOT NULL DEFAULT 0;
UPDATE drover_dead_letters SET payload_bytes = coalesce(length(CAST(payload AS BLOB)), 0);
`,
	}, {
		version: 4,
		name:    "node heartbeats",
		// A node's renewal round writes its heartbeat row instead of
		// every lease row (persistence.Leases.RenewLeases): a lease's
		// staleness is judged by the later of its renewed_at and its
		// owner's heartbeat_at. lease_changes counts the writes to the
		// owner's lease rows other than its own rounds (an Acquire that
		// ends its token, its Renew, its Release): a round that finds it
		// unchanged, and the owner's row count as it was, need not check
		// each lease (Store.RenewLeases). The index on owner makes that
		// count cheap.
		sql: `
CREATE TABLE drover_nodes (
	node          TEXT    PRIMARY KEY,
	heartbeat_at  INTEGER NOT NULL, -- unix nanoseconds, UTC; 0: never
	lease_changes INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX drover_leases_owner ON drover_leases (owner);
`,
	}, {
		version: 5,
		name:    "controls and their audit",
		// Issue 13: an operator's standing controls (pause, a pending
		// seek), one row per target (a source: unit '', or one unit),
		// read by every node once per renewal round; and the audit of
		// every control (persistence.Controls).
		sql: `
CREATE TABLE drover_controls (
	source       TEXT    NOT NULL,
	unit         TEXT    NOT NULL DEFAULT '',
	paused       INTEGER NOT NULL DEFAULT 0,
	seek         TEXT    NOT NULL DEFAULT '',
	seek_id      INTEGER NOT NULL DEFAULT 0,
	seek_done_id INTEGER NOT NULL DEFAULT 0,
	"by"         TEXT    NOT NULL DEFAULT '',
	reason       TEXT    NOT NULL DEFAULT '',
	updated_at   INTEGER NOT NULL, -- unix nanoseconds, UTC
	PRIMARY KEY (source, unit)
);
CREATE TABLE drover_control_audit (
	id     INTEGER PRIMARY KEY AUTOINCREMENT,
	at     INTEGER NOT NULL, -- unix nanoseconds, UTC
	node   TEXT    NOT NULL,
	"by"   TEXT    NOT NULL,
	action TEXT    NOT NULL,
	source TEXT    NOT NULL,
	unit   TEXT    NOT NULL,
	args   TEXT    NOT NULL,
	reason TEXT    NOT NULL
);
CREATE INDEX drover_control_audit_unit ON drover_control_audit (unit, id);
`,
	}, {
		version: 6,
		name:    "checkpoint stream id",
		// The stream incarnation a checkpoint's position belongs to (a
		// Kafka topic ID): a topic deleted and created again, then
		// refilled past the checkpoint, is told from the old one by it.
		// '' is unknown; a unit records it at its next open.
		sql: `
ALTER TABLE drover_checkpoints ADD COLUMN stream_id TEXT NOT NULL DEFAULT '';
`,
	}, {
		version: 7,
		name:    "seek requested at",
		// When a control row's newest seek was asked for (unix
		// nanoseconds, UTC; 0: none): a seek pending longer than the
		// node's seek expiry is marked done, expired, never carried out.
		// A seek pending from before counts as asked at its row's last
		// change.
		sql: `
ALTER TABLE drover_controls ADD COLUMN seek_requested_at INTEGER NOT NULL DEFAULT 0;
UPDATE drover_controls SET seek_requested_at = updated_at WHERE seek <> '';
`,
	}}
}

// schemaVersion is the version this build migrates to.
func schemaVersion() int {
	ms := migrations()
	return ms[len(ms)-1].version
}

// migrate brings the database to schemaVersion in one immediate transaction,
// so that processes opening the same file at once run each step exactly
// once. A database whose version is newer than this build's is refused with
// persistence.ErrSchemaTooNew and left untouched.
func migrate(ctx context.Context, db *sql.DB) (from, to int, err error) {
	tx, err := db.BeginTx(ctx, nil) // BEGIN IMMEDIATE: the DSN's _txlock
	if err != nil {
		return 0, 0, dbErr(err)
	}
	defer rollbackOnError(tx, &err)
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS drover_schema (
	id      INTEGER PRIMARY KEY CHECK (id = 1),
	version INTEGER NOT NULL
)`); err != nil {
		return 0, 0, dbErr(err)
	}
	err = tx.QueryRowContext(ctx, `SELECT version FROM drover_schema WHERE id = 1`).Scan(&from)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, 0, dbErr(err)
	}
	latest := schemaVersion()
	if from > latest {
		return from, from, fmt.Errorf("database schema version %d, this drover knows up to %d: %w", from, latest, persistence.ErrSchemaTooNew)
	}
	for _, m := range migrations() {
		if m.version <= from {
			continue
		}
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			return from, from, fmt.Errorf("migration %d (%s): %w", m.version, m.name, dbErr(err))
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO drover_schema (id, version) VALUES (1, ?)
ON CONFLICT (id) DO UPDATE SET version = excluded.version`, latest); err != nil {
		return from, from, dbErr(err)
	}
	if err := tx.Commit(); err != nil {
		return from, from, dbErr(err)
	}
	return from, latest, nil
}

// readSchema checks, without writing, that a database holds drover's
// schema at this build's version (a read-only Store cannot migrate).
func readSchema(ctx context.Context, db *sql.DB) (int, error) {
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'drover_schema'`).Scan(&n); err != nil {
		return 0, dbErr(err)
	}
	if n == 0 {
		return 0, errors.New("not a drover store: it has no drover_schema table")
	}
	var v int
	if err := db.QueryRowContext(ctx, `SELECT version FROM drover_schema WHERE id = 1`).Scan(&v); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return 0, errors.New("not a drover store: drover_schema holds no version")
		}
		return 0, dbErr(err)
	}
	latest := schemaVersion()
	switch {
	case v > latest:
		return v, fmt.Errorf("database schema version %d, this drover knows up to %d: %w", v, latest, persistence.ErrSchemaTooNew)
	case v < latest:
		return v, fmt.Errorf("database schema version %d, this drover's is %d: a read-only open cannot migrate it (a node, or any read-write open, does)", v, latest)
	}
	return v, nil
}
