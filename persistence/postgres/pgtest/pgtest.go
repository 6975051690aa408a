package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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
	local    bool   // never use EnvURL
	bin      string // directory of initdb and pg_ctl
	dir      string // the throwaway cluster's directory
	port     int
	runAs    bool // run the binaries as the postgres user (we are root)

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
func Main(m *testing.M, s *Server) int {
	code := m.Run()
	if err := s.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// URL creates a fresh database for the calling test and returns its URL.
// It skips the test when no server can be had (fails under CI=true) and
// fails it when a server should exist but did not start.
func (s *Server) URL(t testing.TB) string {
	t.Helper()
	s.once.Do(s.setup)
	if s.skip != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("pgtest: CI=true and no PostgreSQL: %s", s.skip)
		}
		t.Skipf("pgtest: %s", s.skip)
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
	if out, err := s.run(ctx, "pg_ctl", "-D", s.dataDir(), "-m", "immediate", "-w", "stop"); err != nil {
		return fmt.Errorf("pgtest: stop: %v: %s", err, out)
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

// Close stops and removes a throwaway server; it does nothing to an
// external one. It may be called more than once.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.dir == "" {
		return nil
	}
	var errs []error
	if s.running {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if out, err := s.run(ctx, "pg_ctl", "-D", s.dataDir(), "-m", "immediate", "-w", "stop"); err != nil {
			errs = append(errs, fmt.Errorf("pgtest: stop: %v: %s", err, out))
		}
		s.running = false
	}
	if err := os.RemoveAll(s.dir); err != nil {
		errs = append(errs, fmt.Errorf("pgtest: remove %s: %w", s.dir, err))
	}
	return errors.Join(errs...)
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
	bin, looked := findBin()
	if bin == "" {
		s.skip = fmt.Sprintf("%s is not set and no PostgreSQL binaries were found (looked in %s)", EnvURL, looked)
		return
	}
	s.bin = bin
	if os.Geteuid() == 0 {
		// initdb refuses to run as root.
		s.runAs = true
		if _, err := exec.LookPath("runuser"); err != nil {
			s.skip = "running as root, and runuser is not available to run initdb as the postgres user"
			return
		}
	}
	s.err = s.initCluster()
}

// findBin returns the directory holding initdb and pg_ctl, or "" and where
// it looked.
func findBin() (dir, looked string) {
	has := func(d string) bool {
		for _, f := range []string{"initdb", "pg_ctl"} {
			if st, err := os.Stat(filepath.Join(d, f)); err != nil || st.IsDir() {
				return false
			}
		}
		return true
	}
	if d := os.Getenv(EnvBin); d != "" {
		if has(d) {
			return d, ""
		}
		return "", EnvBin + "=" + d
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	// Newest major version first.
	sort.Slice(dirs, func(i, j int) bool { return majorOf(dirs[i]) > majorOf(dirs[j]) })
	for _, d := range dirs {
		if has(d) {
			return d, ""
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil && has(filepath.Dir(p)) {
		return filepath.Dir(p), ""
	}
	return "", "/usr/lib/postgresql/*/bin and PATH"
}

func majorOf(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func (s *Server) dataDir() string { return filepath.Join(s.dir, "data") }

func (s *Server) initCluster() error {
	dir, err := os.MkdirTemp("", "drover-pgtest-")
	if err != nil {
		return fmt.Errorf("temp dir: %w", err)
	}
	s.dir = dir
	if s.runAs {
		u, err := user.Lookup("postgres")
		if err != nil {
			s.skip = "running as root and there is no postgres user to run initdb as"
			return nil
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return fmt.Errorf("chown %s to postgres: %w", dir, err)
		}
		// The postgres user must be able to reach the directory.
		for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
			st, err := os.Stat(p)
			if err != nil {
				return fmt.Errorf("stat %s: %w", p, err)
			}
			if st.Mode().Perm()&0o001 == 0 {
				return fmt.Errorf("%s is not traversable by the postgres user; point TMPDIR elsewhere", p)
			}
			if p == filepath.Dir(p) {
				break
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := s.run(ctx, "initdb", "-D", s.dataDir(), "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--no-locale", "--no-sync"); err != nil {
		return fmt.Errorf("initdb: %v: %s", err, out)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// A free port can be taken between choosing and binding it: try again.
	var lastErr error
	for range 3 {
		port, err := freePort()
		if err != nil {
			return err
		}
		s.port = port
		s.adminURL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
		if lastErr = s.startLocked(); lastErr == nil {
			return nil
		}
		if !strings.Contains(lastErr.Error(), "already in use") {
			break
		}
	}
	return lastErr
}

// startLocked runs pg_ctl start; s.mu is held.
func (s *Server) startLocked() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	opts := fmt.Sprintf("-h 127.0.0.1 -p %d -k %s -c fsync=off -c full_page_writes=off -c max_connections=300", s.port, s.dir)
	logFile := filepath.Join(s.dir, "pg.log")
	if out, err := s.run(ctx, "pg_ctl", "-D", s.dataDir(), "-l", logFile, "-w", "-t", "60", "-o", opts, "start"); err != nil {
		log, _ := os.ReadFile(logFile)
		return fmt.Errorf("pg_ctl start on port %d: %v: %s\n%s", s.port, err, out, tail(log, 2000))
	}
	s.running = true
	return nil
}

// run runs one of the PostgreSQL binaries, as the postgres user when we
// are root, and returns its combined output.
func (s *Server) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	path := filepath.Join(s.bin, name)
	var cmd *exec.Cmd
	if s.runAs {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, path, args...)
	}
	cmd.Dir = s.dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// pg_ctl leaves a server behind; should it ever hold our pipe, do not
	// wait for it past this.
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	return bytes.TrimSpace(out.Bytes()), err
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
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

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
