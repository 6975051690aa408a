// Package postgres is the PostgreSQL persistence.Store, on a pgx/v5
// connection pool.
//
// # Guarantees
//
// The guarantees of package persistence, with PostgreSQL doing the work:
//
//   - Leases: Acquire is one INSERT ... ON CONFLICT DO UPDATE ... WHERE, so
//     of concurrent acquirers exactly one wins (the others wait on the row
//     lock, then find it held). Expiry is judged by the server's now().
//     Every success increments the token; Release keeps it.
//   - Apply is one transaction that first locks the unit's lease row
//     (drover_fence: SELECT ... FOR UPDATE) and commits only under the
//     token it checked: a stale token gets persistence.ErrLeaseLost and
//     nothing is written. It sends one statement per table for the whole
//     batch (unnest arrays, key = ANY), pipelined: a stream batch is one
//     round trip whatever its size; a queue batch (dedupe) or a handler
//     batch is begin, two pipelines and commit, plus the handler's own.
//   - An upsert whose document equals the stored one (jsonb equality: key
//     order, whitespace and number spelling do not matter) leaves the row,
//     its updated_at included, as it was and counts as Unchanged.
//   - A checkpoint moves only forward in the order of
//     brokers.ComparePositions; Finished is sticky.
//   - Migrations are embedded and run on Open, each once, serialised
//     between concurrent openers by an advisory lock; a database migrated
//     by a newer drover is refused with persistence.ErrSchemaTooNew.
//
// The semantics the persistence package leaves open are those of package
// memory (see its doc): an empty AcquireRequest.Live takes over any lease;
// Apply is fenced by the token alone; a message id repeated within a batch
// is a duplicate the second time; a repeated dead letter counts an attempt
// and is pending again; Handle is called only with fresh OpMessage ops.
//
// # Tables
//
// DESIGN §6, in Config.Schema (default: the connection's current schema):
// drover_leases, drover_checkpoints (plus finished), drover_dead_letters,
// drover_dedupe, drover_quality (plus node), drover_migrations (the schema
// version), and one records table per source, created on first use by the
// transaction that first writes it, its name validated by
// persistence.ValidTable and quoted. Key columns use the "C" collation so
// that rows order bytewise, as Go strings do.
//
// # Errors
//
// No pgx type leaves the package: a PostgreSQL error becomes *Error (with
// its SQLSTATE), any other driver error its text, still matching
// context.Canceled and context.DeadlineExceeded. Decisions callers make
// are sentinels of package persistence. Handle's error is returned as is.
//
// # Goroutines
//
// A Store is safe for concurrent use. It starts no goroutines of its own;
// the pgx pool runs a health-check goroutine until Close. Every method
// honours ctx. Batch.Handle runs on the caller's goroutine inside the
// batch's transaction; the Tx it gets serialises its calls and is dead
// once Handle returns.
package postgres
