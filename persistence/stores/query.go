package stores

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/drover-dev/drover/internal/redact"
)

// Query runs a read-only SQL query on the database of a PostgreSQL or
// SQLite store URL ($1-style parameters work on both) and calls row for
// each row with its Scan. It is for tools and tests that read drover's
// tables directly (the demo's verifier, the audit table); the runtime goes
// through persistence.Store.
func Query(ctx context.Context, rawURL, q string, args []any, row func(scan func(...any) error) error) error {
	t, err := Parse(rawURL)
	if err != nil {
		return err
	}
	var rows interface {
		Next() bool
		Scan(...any) error
		Err() error
	}
	switch t.Kind {
	case Postgres:
		conn, err := pgx.Connect(ctx, rawURL)
		if err != nil {
			return scrub(rawURL, fmt.Errorf("query %s: %w", redact.URL(rawURL), err))
		}
		defer conn.Close(ctx)
		r, err := conn.Query(ctx, q, args...)
		if err != nil {
			return scrub(rawURL, fmt.Errorf("query %s: %w", redact.URL(rawURL), err))
		}
		defer r.Close()
		rows = r
	case SQLite:
		db, err := sql.Open("sqlite", "file:"+t.Path+"?mode=ro&_pragma=busy_timeout(10000)")
		if err != nil {
			return scrub(rawURL, fmt.Errorf("query %s: %w", redact.URL(rawURL), err))
		}
		defer db.Close()
		r, err := db.QueryContext(ctx, q, args...)
		if err != nil {
			return scrub(rawURL, fmt.Errorf("query %s: %w", redact.URL(rawURL), err))
		}
		defer r.Close()
		rows = r
	default:
		return fmt.Errorf("query %s: only SQL stores can be queried", redact.URL(rawURL))
	}
	for rows.Next() {
		if err := row(rows.Scan); err != nil {
			return err
		}
	}
	return rows.Err()
}
