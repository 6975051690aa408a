package postgres

import (
	"fmt"
	"log/slog"
	"regexp"
)

// Config tunes a Store. The zero value means the defaults.
type Config struct {
	// Schema puts every drover table, records tables included, in this
	// PostgreSQL schema, created on open when missing. Empty: the first
	// schema of the connection's search_path (usually public).
	Schema string
	// MaxConns caps the connection pool; 0: the pool's default (the
	// greater of 4 and the number of CPUs) or pool_max_conns from the URL.
	MaxConns int32
	// Logger receives migration and table-creation messages; nil discards.
	Logger *slog.Logger
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
	return nil
}
