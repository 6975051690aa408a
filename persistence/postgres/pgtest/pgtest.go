package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/drover-dev/drover/internal/pglocal"
	"github.com/drover-dev/drover/internal/testserver"
)

// Environment variables pgtest reads.
const (
	// EnvURL names an existing server to use instead of a throwaway one.
	EnvURL = "DROVER_TEST_POSTGRES_URL"
	// EnvBin names the directory holding initdb and pg_ctl.
	EnvBin = "DROVER_TEST_POSTGRES_BIN"
)

// ErrExternal is returned by Stop and Start when the server comes from
// DROVER_TEST_POSTGRES_URL: pgtest does not own it.
var ErrExternal = errors.New("pgtest: the server is external (" + EnvURL + "); it cannot be stopped or started")

// Server is the PostgreSQL server of one test binary. The zero value is not
// usable; call New. Declare one per test package and close it from TestMain
// (Main does both).
type Server struct {
	once sync.Once

	// Set once by setup.
	skip     string // why there is no server (skip, or fail under CI)
	err      error  // a server should exist but could not be started
	adminURL string // URL of the maintenance database
	external bool
	local    bool             // never use EnvURL
	cluster  *pglocal.Cluster // the throwaway cluster

	seq atomic.Int64

	mu      sync.Mutex // serialises Stop, Start and Close
	running bool
	closed  bool
}

// New returns a Server that starts on first use: the one EnvURL names,
// else a throwaway cluster.
func New() *Server { return &Server{} }

// NewLocal returns a Server that is always a throwaway cluster, even when
// EnvURL is set: for tests that must stop and restart their server. Close
// it when done (t.Cleanup).
func NewLocal() *Server { return &Server{local: true} }

// Main runs the tests and then closes s; use it as
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m, pg)) }
func Main(m *testing.M, s *Server) int { return testserver.Main(m, s) }

// URL creates a fresh database for the calling test and returns its URL.
// It skips the test when no server can be had (fails under CI=true) and
// fails it when a server should exist but did not start.
func (s *Server) URL(t testing.TB) string {
	t.Helper()
	s.once.Do(s.setup)
	if s.skip != "" {
		testserver.SkipOrFailWith(t, "pgtest: CI=true and no PostgreSQL: "+s.skip, "pgtest: "+s.skip)
	}
	if s.err != nil {
		t.Fatalf("pgtest: %v", s.err)
	}
	name := fmt.Sprintf("drover_t%d_%d", os.Getpid(), s.seq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.admin(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	if s.external {
		// A throwaway cluster is removed whole by Close; an external
		// server keeps nothing of ours.
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := s.admin(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
				t.Logf("pgtest: drop database %s: %v", name, err)
			}
		})
	}
	u, err := withDatabase(s.adminURL, name)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return u
}

// Throwaway reports whether the server is a cluster pgtest started (and
// can Stop and Start). It starts it if needed.
func (s *Server) Throwaway() bool {
	s.once.Do(s.setup)
	return s.skip == "" && s.err == nil && !s.external
}

// Stop stops a throwaway server at once (pg_ctl -m immediate stop), as a
// crash would; connections break. It returns ErrExternal for an external
// server.
func (s *Server) Stop() error {
	s.once.Do(s.setup)
	if err := s.usable(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || !s.running {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.cluster.Stop(ctx); err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	s.running = false
	return nil
}

// Start restarts a throwaway server stopped by Stop, on the same port and
// data directory, and waits until it accepts connections. It returns
// ErrExternal for an external server.
func (s *Server) Start() error {
	s.once.Do(s.setup)
	if err := s.usable(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("pgtest: start: server closed")
	}
	if s.running {
		return nil
	}
	return s.startLocked()
}

// startLocked starts the cluster; s.mu is held.
func (s *Server) startLocked() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := s.cluster.Start(ctx); err != nil {
		return err
	}
	s.running = true
	return nil
}

// Close stops and removes a throwaway server; it does nothing to an
// external one. It may be called more than once.
func (s *Server) Close() error { return testserver.CloseOnce(&s.mu, &s.closed, s.removeLocked) }

// removeLocked removes a throwaway cluster; s.mu is held.
func (s *Server) removeLocked() error {
	if s.cluster == nil {
		return nil
	}
	s.running = false
	if err := s.cluster.Remove(); err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	return nil
}

func (s *Server) usable() error {
	switch {
	case s.skip != "":
		return errors.New("pgtest: " + s.skip)
	case s.err != nil:
		return s.err
	case s.external:
		return ErrExternal
	}
	return nil
}

// admin runs one statement on the maintenance database.
func (s *Server) admin(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, s.adminURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql)
	return err
}

func (s *Server) setup() {
	if u := os.Getenv(EnvURL); u != "" && !s.local {
		s.external = true
		s.adminURL = u
		return
	}
	bin, looked := pglocal.FindBin(os.Getenv(EnvBin))
	if bin == "" && os.Getenv(EnvBin) != "" {
		looked = EnvBin + "=" + looked
	}
	if bin == "" {
		s.skip = fmt.Sprintf("%s is not set and no PostgreSQL binaries were found (looked in %s)", EnvURL, looked)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := pglocal.Init(ctx, bin, "drover-pgtest-")
	if errors.Is(err, pglocal.ErrUnavailable) {
		s.skip = err.Error()
		return
	}
	if err != nil {
		s.err = err
		return
	}
	c.MaxConnections = 300
	s.cluster = c
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err = s.startLocked(); s.err == nil {
		s.adminURL = c.URL()
	}
}

// withDatabase returns base with its database replaced by name.
func withDatabase(base, name string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("parse %s: %w", EnvURL, err)
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return "", fmt.Errorf("%s: want a postgres:// URL, got scheme %q", EnvURL, u.Scheme)
	}
	u.Path = "/" + name
	u.RawPath = ""
	return u.String(), nil
}
