package postgres

import (
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/drover-dev/drover/persistence/internal/sqlstore"
)

// DefaultTimeout is the default of Config.Timeout.
//
// Ten seconds: far above what any call takes on a healthy server (a
// 1,000-row batch is one round trip of a few milliseconds, a migration
// well under a second), so a slow moment is not an outage; and no longer
// than the default lease TTL (10 s), so a call stuck behind a dead
// transaction gives up, and frees its pool connection, about when the
// lease it works under would expire anyway. Callers that must act sooner
// (lease renewals) pass a shorter context.
const DefaultTimeout = 10 * time.Second

// MinTimeout is the shortest Config.Timeout accepted.
const MinTimeout = 10 * time.Millisecond

// Config tunes a Store. The zero value means the defaults.
type Config struct {
	// Schema puts every drover table, records tables included, in this
	// PostgreSQL schema, created on open when missing. Empty: the first
	// schema of the connection's search_path (usually public).
	Schema string
	// MaxConns caps the connection pool; 0: the pool's default (the
	// greater of 4 and the number of CPUs) or pool_max_conns from the URL.
	MaxConns int32
	// Timeout bounds every call of the Store, Open included (a ctx with
	// an earlier deadline is kept), and sets the session timeouts of
	// every connection (see doc.go, Timeouts); 0: DefaultTimeout. A handler
	// batch's Handle runs within its Apply's bound.
	Timeout time.Duration
	// Logger receives migration and table-creation messages; nil discards.
	Logger *slog.Logger
	// ReadOnly opens the store for tools that only look (drover dlq list,
	// show): every connection starts with default_transaction_read_only
	// on, whatever the URL says, so the server refuses any write
	// (SQLSTATE 25006), and Open creates and migrates nothing: a schema
	// without drover's tables, or at another version than this drover's,
	// is an error naming it.
	ReadOnly bool
}

var schemaRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// Validate reports the first invalid field.
func (c Config) Validate() error {
	if c.Schema != "" && !schemaRE.MatchString(c.Schema) {
		return fmt.Errorf("schema %q: must match %s", c.Schema, schemaRE)
	}
	if c.MaxConns < 0 {
		return fmt.Errorf("max conns %d: must not be negative", c.MaxConns)
	}
	return sqlstore.CheckTimeout(c.Timeout, MinTimeout, DefaultTimeout)
}

func (c Config) timeout() time.Duration { return sqlstore.Timeout(c.Timeout, DefaultTimeout) }

// sessionParams are the settings every connection of a Store with this
// timeout starts with (sent in the startup message, so no connection is
// ever without them). With timeout T:
//
//   - lock_timeout = T/2: a statement waiting for a row or advisory lock
//     (a lease row locked FOR UPDATE by another transaction's fence) gives
//     up with SQLSTATE 55P03 while its call still has half its budget,
//     instead of waiting for as long as the holder lives.
//   - statement_timeout = T: no statement outlives the call that sent it,
//     even when the client is gone.
//   - idle_in_transaction_session_timeout = T: every drover transaction
//     lives inside one call, bounded by T, so a session idle inside a
//     transaction for T is an orphan (its node vanished mid-transaction);
//     the server ends it and its locks are released.
//
// A parameter the store URL sets itself (postgres://…?lock_timeout=2s) is
// kept.
func sessionParams(timeout time.Duration) map[string]string {
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%dms", max(d.Milliseconds(), 1)) }
	return map[string]string{
		"lock_timeout":                        ms(timeout / 2),
		"statement_timeout":                   ms(timeout),
		"idle_in_transaction_session_timeout": ms(timeout),
	}
}
