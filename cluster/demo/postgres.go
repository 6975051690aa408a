package demo

import (
	"context"
	"errors"
	"fmt"

	"github.com/drover-dev/drover/internal/pglocal"
)

// ErrNoPostgres is wrapped by StartPostgres when there is no local
// PostgreSQL it can run: no binaries (initdb and pg_ctl) found, or, as
// root, no postgres user or no runuser to run them as that user.
var ErrNoPostgres = pglocal.ErrUnavailable

// Postgres is a throwaway PostgreSQL server started from the local
// binaries for `drover demo --chaos` (see internal/pglocal). Close stops
// it and removes its directory.
type Postgres struct {
	c *pglocal.Cluster
}

// StartPostgres starts a throwaway server (about 1–2 s). When there is no
// local PostgreSQL to run, the error wraps ErrNoPostgres.
func StartPostgres(ctx context.Context) (*Postgres, error) {
	bin, looked := pglocal.FindBin("")
	if bin == "" {
		return nil, fmt.Errorf("demo: %w: no initdb and pg_ctl (looked in %s)", ErrNoPostgres, looked)
	}
	c, err := pglocal.Init(ctx, bin, "drover-demo-pg-")
	if err != nil {
		return nil, fmt.Errorf("demo: postgres: %w", err)
	}
	if err := c.Start(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("demo: postgres: %w", err), c.Remove())
	}
	return &Postgres{c: c}, nil
}

// URL is the server's maintenance database, which the demo uses as its
// store.
func (p *Postgres) URL() string { return p.c.URL() }

// Close stops the server at once and removes its directory.
func (p *Postgres) Close() error {
	if err := p.c.Remove(); err != nil {
		return fmt.Errorf("demo: postgres: %w", err)
	}
	return nil
}
