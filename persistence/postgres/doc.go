// Package postgres is the PostgreSQL persistence.Store, on a pgx/v5
// connection pool.
//
// # Guarantees
//
// The guarantees of package persistence, with PostgreSQL doing the work:
//
//   - Leases: Acquire is one INSERT ... ON CONFLICT DO UPDATE ... WHERE, so
//     of concurrent acquirers exactly one wins (the others wait on the row
//     lock, then find it held). Expiry and staleness are judged by the
//     server's now(): a holder absent from AcquireRequest.Live is taken
//     over only when its renewed_at and its heartbeat (drover_nodes) are
//     at least Stale old. Every success increments the token and sets
//     renewed_at; Release keeps the token.
//   - RenewLeases is one statement: the owner's heartbeat upsert, a join
//     of every lease given (unnest of arrays) to its row, and an UPDATE of
//     those the owner holds with their tokens whose expiry is less than
//     ttl/2 away, locked in a CTE FOR UPDATE SKIP LOCKED; only rows that
//     differ from what the caller gave come back. A row another transaction holds (an Apply's
//     fence, an orphaned transaction) is skipped instead of stalling the
//     whole renewal: that lease is reported neither renewed nor lost (a
//     plain read of the statement's snapshot tells it from a lost one),
//     and the caller tries it again.
//   - Apply is one transaction that first locks the unit's lease row
//     (drover_fence: SELECT ... FOR UPDATE) and commits only under the
//     token it checked: a stale token gets persistence.ErrLeaseLost and
//     nothing is written. It sends one statement per table for the whole
//     batch (unnest arrays, key = ANY), pipelined: a stream batch is one
//     round trip whatever its size (the store's own pipeline, whose
//     text[] arguments it encodes itself: encodeQuery); a queue batch
//     (dedupe) or a handler batch is begin, two pipelines and commit,
//     plus the handler's own.
//   - ApplyGroup (group commit) sends the stream batches of a group as
//     pipelines with a Sync after each batch (each its own implicit
//     transaction, rolled back alone by its fence or a refused record),
//     cut over the pool's connections; the group's other batches go as
//     Apply writes them, at the same time.
//   - Lock order: dedupe ids and record keys are written sorted (bytewise),
//     so that two transactions that overlap (two slots of a queue given
//     the same redeliveries, two units writing the same keys) wait for
//     each other instead of deadlocking (SQLSTATE 40P01).
//   - An upsert whose document equals the stored one (jsonb equality: key
//     order, whitespace and number spelling do not matter) leaves the row,
//     its updated_at included, as it was and counts as Unchanged.
//   - A checkpoint moves only forward in the order of
//     brokers.ComparePositions (the empty position, then start markers
//     '@…' as text, then decimals and sub-positions "<n>/<i>" by value,
//     then other text bytewise;
//     computed in SQL by positionKey); Finished is sticky. Batch.Reset
//     writes the checkpoint as given, backwards too, with Finished as the
//     batch says.
//   - InitSource is INSERT ... ON CONFLICT DO NOTHING, then a SELECT in a
//     statement of its own: a caller that lost the race waits for the
//     winner's insert and reads its units.
//   - Migrations are embedded and run on Open, each once, serialised
//     between concurrent openers by an advisory lock; a database migrated
//     by a newer drover is refused with persistence.ErrSchemaTooNew.
//
// The semantics the persistence package leaves open are those of package
// memory (see its doc): an empty AcquireRequest.Live counts every holder
// absent; Apply is fenced by the token alone; a message id repeated within
// a batch is a duplicate the second time; a repeated dead letter counts an
// attempt and is pending again; Handle is called only with fresh OpMessage
// ops.
//
// # Timeouts
//
// Config.Timeout (store.timeout, default 10 s) bounds every call, Open
// included; a ctx with an earlier deadline is kept. A handler batch's
// Handle runs inside that bound, with the fence lock held. PruneDedupe
// deletes in chunks of 10,000 rows, each chunk a statement with that
// bound, until nothing old is left or ctx ends, so a busy queue's backlog
// never runs into statement_timeout. Every
// connection also starts with session settings derived from it, so that
// the server itself ends what a client can no longer end:
//
//   - lock_timeout = Timeout/2: a statement waiting for a lock (a takeover
//     behind a fence an orphaned transaction holds) fails with SQLSTATE
//     55P03 while its call still has half its budget, and frees its pool
//     connection.
//   - statement_timeout = Timeout: no statement outlives its call, even
//     when the client is gone.
//   - idle_in_transaction_session_timeout = Timeout: every drover
//     transaction lives within one call, so a session idle inside a
//     transaction that long is an orphan (its node vanished mid-batch);
//     the server ends it and its locks go. A takeover behind an orphan
//     therefore succeeds at most about Timeout after the orphan went
//     silent, rather than after TCP keepalive gives up (hours).
//
// They are sent in the startup message (pgx RuntimeParams), so no
// connection is ever without them; one the URL sets itself
// (postgres://…?lock_timeout=2s) is kept. A connection pooler must pass
// them through (PgBouncer: ignore_startup_parameters, or set them on the
// role).
//
// # Tables
//
// architecture §6, in Config.Schema (default: the connection's current schema):
// drover_leases (plus renewed_at), drover_checkpoints (plus finished and,
// 0006, stream_id: the stream incarnation of its position),
// drover_dead_letters (plus payload_bytes), drover_dedupe, drover_quality (plus node),
// drover_sources (source, units jsonb, created_at), drover_nodes (node,
// heartbeat_at), drover_controls and drover_control_audit (0005: operators'
// controls and their audit, persistence.Controls), drover_migrations
// (the schema version), and one records table per source, created on
// first use by the transaction that first writes it, its name validated
// by persistence.ValidTable and quoted. Key columns use the "C" collation
// so that rows order bytewise, as Go strings do.
//
// # Errors
//
// No pgx type leaves the package: a PostgreSQL error becomes *Error (with
// its SQLSTATE), any other driver error its text, still matching
// context.Canceled and context.DeadlineExceeded. Decisions callers make
// are sentinels of package persistence. Handle's error is returned as is.
//
// An *Error matches persistence.ErrPermanent when the server refused what
// the batch writes (Error.Permanent): SQLSTATE classes 22 (data
// exception), 23 (integrity constraint violation, except on the system
// catalog, which concurrent CREATE TABLE IF NOT EXISTS violates), 42
// (syntax error or access rule violation, except the codes that refuse
// the schema's state: 42501 insufficient_privilege, which a GRANT fixes,
// 42P01 undefined_table, which the store repairs by creating the records
// table again, and the others Error.Permanent lists) and 54 (program
// limit exceeded). The
// others — 08 connection, 40 rollback (serialization, deadlock), 53
// resources, 55 lock not available, 57 operator intervention — and every
// driver error are transient.
//
// # Limits
//
// Each kind of write of a batch travels as the array parameters of one
// statement, and the server refuses a message or array over 1 GB (a
// protocol violation that ends the connection: it would look transient).
// Apply therefore refuses, as permanent and before sending anything, a
// batch whose ops carry more than MaxBatchBytes (512 MiB); drover check
// refuses a batch_bytes above it. Migration 3 adds
// drover_dead_letters.payload_bytes, the size of the message body a
// dead letter's payload may have been cut from (rows of before get the
// length of their payload).
//
// # Goroutines
//
// A Store is safe for concurrent use. It starts no goroutines of its own;
// the pgx pool runs a health-check goroutine until Close. Every method
// honours ctx and its own deadline. Batch.Handle runs on the caller's
// goroutine inside the batch's transaction; the Tx it gets serialises its
// calls and is dead once Handle returns.
package postgres
