// Package sqlite is drover's embedded default store: one SQLite file
// (sqlite:./drover.db) on modernc.org/sqlite, which needs no cgo, shared by
// several node processes on one machine.
//
// # Guarantees
//
//   - The guarantees of package persistence, checked by the storetest suite
//     with the same semantics as package memory (see storetest's doc for the
//     points the interface leaves open).
//   - Processes share the file safely: journal_mode=WAL (readers never wait
//     for the writer), busy_timeout = Config.Timeout (store.timeout,
//     default 10 s: a writer waits for another process's transaction
//     instead of failing), and every transaction
//     BEGINs IMMEDIATE (_txlock=immediate), taking the write lock up front:
//     a deferred transaction that read first and then writes fails at once
//     with SQLITE_BUSY when another process wrote meanwhile, whatever the
//     timeout. Leases, fencing and checkpoints are therefore serialised
//     across processes by SQLite's lock.
//   - One connection per Store (SetMaxOpenConns(1)): within a process,
//     writers queue in database/sql rather than on the file lock.
//   - ApplyGroup (group commit) writes a group of batches in one
//     immediate transaction; a batch fenced off, refused or failed by its
//     handler fails alone. Without handlers the group runs without
//     savepoints and, when a batch fails after its fence, is rolled back
//     and run again without it; with one, each batch has a savepoint.
//   - Connection settings: synchronous=NORMAL, a 32 MiB page cache,
//     temp_store=MEMORY, and WAL checkpoints off the commit path: PASSIVE
//     checkpoints on a connection of the Store's own, a round at most
//     every 10 ms while batches commit (each commit asks for one) and
//     every 200 ms otherwise, which
//     past 4,096 frames has the Store's connection copy the last few
//     between two transactions so that the WAL starts over; the writer's
//     wal_autocheckpoint only a backstop at 16,384 pages
//     (walcheckpoint.go).
//   - The records upsert and the checkpoint's call Go functions inside
//     SQLite (sqlfuncs.go): an unchanged document and a checkpoint that
//     would not move are left as they are without being read first.
//   - Processes that open one fresh file at once all come up: the first
//     connection's switch to WAL can fail with SQLITE_BUSY at once (no busy
//     wait) while another process switches or migrates, so Open retries
//     the whole open (connect, pragmas, migrations) on SQLITE_BUSY, backing
//     off from 5 ms to 200 ms, within Config.Timeout. Without it 7 to 14 of
//     200 cold starts of three processes lost a process
//     (TestColdStartThreeProcesses).
//   - Every call is bounded by Config.Timeout, a ctx with an earlier
//     deadline kept: waiting for the Store's connection, for another
//     process's lock (busy_timeout) and a handler batch, Handle included
//     (at its deadline database/sql rolls the batch back and frees the
//     connection, even if Handle has not returned). The statements inside
//     a write transaction do not watch ctx themselves (stmtCtx: the
//     driver would start a goroutine per statement): a call ends at most
//     one statement after its bound, with ctx's error. PruneDedupe deletes in
//     chunks of 10,000 rows, each chunk bounded, so that it never holds
//     the write lock long.
//   - Leases: a holder absent from AcquireRequest.Live is taken over only
//     when its renewed_at and its heartbeat (drover_nodes) are at least
//     Stale old by Config.Clock. RenewLeases is one immediate transaction:
//     the heartbeat, a check of the leases (skipped in a quiet round, see
//     renew.go), an UPDATE ... FROM json_each of those due, whose count of
//     rows written is checked (fewer: the leases it missed are read and
//     reported lost); SQLite has no row locks, so every lease is either
//     renewed or lost. Acquire (of a
//     held lease), Renew and Release count in the holder's lease_changes.
//     Batch.Reset writes the checkpoint as given.
//     InitSource inserts (ON CONFLICT DO NOTHING) and reads back in one
//     immediate transaction.
//   - Lease expiry and every timestamp come from Config.Clock (nil:
//     clock.Real{}). Times are stored as INTEGER unix nanoseconds (UTC).
//   - Documents are stored as SQLite's json() of what the caller gave
//     (validated, minified: computed in Go, compactJSON; a document the
//     decoder checked and wrote compact, Op.DocChecked, as given);
//     "unchanged" is decided by comparing with the
//     stored document as JSON values (key order, whitespace and the spelling
//     of numbers ignored), as PostgreSQL's jsonb equality would.
//   - Errors from the driver are translated at this boundary: no
//     modernc.org/sqlite type reaches callers. Callers branch on the
//     persistence sentinels: SQLITE_BUSY and SQLITE_LOCKED match ErrBusy
//     (transient); SQLITE_CONSTRAINT (CHECK, NOT NULL, UNIQUE, triggers'
//     RAISE(ABORT)), SQLITE_MISMATCH and SQLITE_TOOBIG (a value over
//     MaxValueBytes) match ErrPermanent, as does a document that is not
//     JSON; everything else is transient.
//
// # Schema
//
// Migrations are Go strings compiled into the binary and run by Open in one
// immediate transaction, recording the version in drover_schema; running
// them again is a no-op. Version 2 adds drover_leases.renewed_at (existing
// rows get their acquired_at; see migrate.go) and drover_sources (source,
// units as a JSON array, created_at); version 3 adds
// drover_dead_letters.payload_bytes, the size of the message body a dead
// letter's payload may have been cut from (existing rows: the length of
// their payload); version 4 adds drover_nodes (node, heartbeat_at,
// lease_changes) and an index of drover_leases on owner; version 5 adds
// drover_controls and drover_control_audit (persistence.Controls); version 6
// adds drover_checkpoints.stream_id. A file whose version is newer than
// this build's is refused with an error wrapping persistence.ErrSchemaTooNew
// that names both versions. Records tables ("key" TEXT PRIMARY KEY, doc, source, unit,
// position, updated_at) are created on first use, outside the batch's
// transaction, with the name checked by persistence.ValidTable and quoted.
// SQLite folds the case of names, so ValidTable refuses the drover_ and
// sqlite_ prefixes in any case ("Drover_leases" is drover_leases here).
//
// # Read-only and must-exist opens
//
// Config.MustExist opens a file only if it exists (SQLite's mode=rw: never
// created); Config.ReadOnly (mode=ro) also migrates and writes nothing,
// and accepts only a file at this build's schema version. Tools that
// inspect a store (drover dlq list/show) open it read-only, so a mistyped
// path is an error instead of a new, empty database.
//
// # Goroutines and blocking
//
// A writing Store starts one goroutine, its WAL checkpointer, which Close
// stops and waits for (a checkpoint waiting for the Store's connection
// gives up); a read-only one starts none (database/sql watches each
// transaction's context with one of its own). Every call may block on the
// file lock for up to busy_timeout, and never beyond Config.Timeout (but
// for the statement running then). Batch.Handle runs while the Store's one
// connection is inside the batch's transaction: it must use its Tx and
// never call the Store, which would wait for that connection forever.
package sqlite
