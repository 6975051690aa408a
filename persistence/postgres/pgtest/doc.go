// Package pgtest gives tests a PostgreSQL server and a fresh database per
// test.
//
// # Where the server comes from
//
//   - When DROVER_TEST_POSTGRES_URL is set, that server is used. Each test
//     gets its own database (CREATE DATABASE), dropped when the test ends.
//   - Otherwise a throwaway cluster is started from the local PostgreSQL
//     binaries (DROVER_TEST_POSTGRES_BIN, else the newest
//     /usr/lib/postgresql/*/bin, else initdb on PATH): initdb and pg_ctl in
//     a temporary directory, listening on a free loopback port, its socket
//     in that directory, trust authentication, fsync off (an immediate stop
//     loses no committed transaction: the OS keeps what was written). When the process
//     runs as root the binaries run as the postgres user through runuser,
//     since initdb refuses root. The cluster starts on the first URL call
//     of a test binary and is stopped (pg_ctl -m immediate stop) and
//     removed by Close, which TestMain calls (see Main).
//   - When neither is available the test is skipped with the reason, or
//     fails when the environment has CI=true.
//
// NewLocal always starts a throwaway cluster, even when the variable is set,
// for tests that must stop their server. Stop and Start stop and restart a
// throwaway server on the same port and data directory, so a test can
// simulate a store outage; with an external server they return ErrExternal.
//
// # Goroutines
//
// pgtest starts no goroutines of its own; the PostgreSQL server is a child
// process tree owned by the Server until Close. A Server is safe for
// concurrent use by parallel tests. A test binary that dies without calling
// Close leaves the throwaway cluster running; its directory name starts with
// "drover-pgtest-" under the temporary directory.
package pgtest
