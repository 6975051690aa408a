// Package stores opens a persistence.Store from the store URL of drover's
// configuration (store.url):
//
//	postgres://user@host:5432/db     PostgreSQL (also postgresql://)
//	sqlite:./drover.db               SQLite, a path relative to the working directory
//	sqlite:/var/lib/drover/drover.db SQLite, an absolute path
//	sqlite:///var/lib/drover/drover.db  the same, URL style
//	memory:                          in memory, for tests and the demo
//
// A URL it cannot use is refused with an error that names what is wrong
// (an unknown scheme with the accepted ones, an empty path, a host in a
// sqlite URL, ...). Errors show the URL as internal/redact masks it
// (passwords, ?password= and other secret parameters, DSN password=
// values, lone user names outside postgres URLs), cut to 100 bytes, and
// the errors of pgx are scrubbed of every secret of the URL: no error of
// Parse, Open or Query shows one.
//
// A PostgreSQL URL passes through to pgx, so its parameters apply (for
// example sslmode, or search_path to pick an existing schema, or a session
// setting such as lock_timeout, which then replaces the one drover derives
// from Options.Timeout).
//
// Options.Timeout (store.timeout) bounds every call of a SQL store and sets
// its lock waits; Options.MaxConns (store.max_conns) sizes the PostgreSQL
// pool. See packages postgres and sqlite.
//
// Goroutines: Open starts none of its own; each store documents its own.
package stores
