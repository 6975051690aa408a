// Package pglocal runs a throwaway PostgreSQL cluster from the local
// binaries: a fresh data directory in a temporary directory, a free
// loopback port, trust authentication, fsync off. It is what the demo's
// chaos run and the tests' pgtest use.
//
// When the process runs as root the binaries run as the postgres user
// through runuser (initdb refuses root). A Cluster is not safe for
// concurrent use: its owner serialises Start, Stop and Remove.
package pglocal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/drover-dev/drover/internal/freeport"
)

// ErrUnavailable is wrapped by Init when there is no local PostgreSQL it
// can run: no initdb and pg_ctl, or, as root, no postgres user or no
// runuser to run them as that user.
var ErrUnavailable = errors.New("no local PostgreSQL to run")

// Cluster is one throwaway cluster.
type Cluster struct {
	bin  string // directory of initdb and pg_ctl
	dir  string // the cluster's temporary directory
	port int    // chosen by the first Start, kept by the next ones
	// held reserves port against other freeport users until Remove,
	// also while the server is stopped between two Starts.
	held   *freeport.Reservation
	runAs  bool       // run the binaries as the postgres user (we are root)
	pgUser *user.User // that user, when runAs
	// MaxConnections is the server's max_connections (default 200).
	MaxConnections int
}

// FindBin returns the directory holding initdb and pg_ctl: override when
// it is not empty, else the newest /usr/lib/postgresql/*/bin, else the
// directory of initdb on PATH; "" and where it looked when there is none.
func FindBin(override string) (dir, looked string) {
	has := func(d string) bool {
		for _, f := range []string{"initdb", "pg_ctl"} {
			if st, err := os.Stat(filepath.Join(d, f)); err != nil || st.IsDir() {
				return false
			}
		}
		return true
	}
	if override != "" {
		if has(override) {
			return override, ""
		}
		return "", override
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	major := func(d string) int { n, _ := strconv.Atoi(filepath.Base(filepath.Dir(d))); return n }
	sort.Slice(dirs, func(i, j int) bool { return major(dirs[i]) > major(dirs[j]) })
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

// Init makes a temporary directory named after prefix and runs initdb in
// it with the binaries of bin. On an error the directory is removed.
func Init(ctx context.Context, bin, prefix string) (*Cluster, error) {
	c := &Cluster{bin: bin}
	if os.Geteuid() == 0 {
		if _, err := exec.LookPath("runuser"); err != nil {
			return nil, fmt.Errorf("%w: running as root, and runuser is not available to run initdb as the postgres user", ErrUnavailable)
		}
		pg, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("%w: running as root and there is no postgres user to run initdb as", ErrUnavailable)
		}
		c.runAs, c.pgUser = true, pg
	}
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	c.dir = dir
	if c.runAs {
		if err := c.giveToPostgresUser(); err != nil {
			_ = c.Remove()
			return nil, err
		}
	}
	if out, err := c.run(ctx, "initdb", "-D", c.dataDir(), "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--no-locale", "--no-sync"); err != nil {
		_ = c.Remove()
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	return c, nil
}

// Start starts the server and waits until it accepts connections. The
// first Start chooses a free port (again, up to three times, when another
// process takes it between choosing and binding); later ones reuse it.
func (c *Cluster) Start(ctx context.Context) error {
	if c.port != 0 {
		return c.start(ctx)
	}
	var err error
	for try := 0; ; try++ {
		if c.held, err = freeport.Reserve(1); err != nil {
			return err
		}
		c.port = c.held.Ports()[0]
		if err = c.start(ctx); err == nil {
			return nil
		}
		c.held.Release()
		c.held = nil
		if try == 2 || !strings.Contains(err.Error(), "already in use") {
			c.port = 0
			return err
		}
	}
}

// Stop stops the server at once (pg_ctl -m immediate stop), as a crash
// would; connections break. Nothing happens when it is not running.
func (c *Cluster) Stop(ctx context.Context) error {
	if _, err := os.Stat(filepath.Join(c.dataDir(), "postmaster.pid")); err != nil {
		return nil
	}
	if out, err := c.run(ctx, "pg_ctl", "-D", c.dataDir(), "-m", "immediate", "-w", "stop"); err != nil {
		return fmt.Errorf("stop postgres: %v: %s", err, out)
	}
	return nil
}

// Remove stops the server if it runs and removes its directory.
func (c *Cluster) Remove() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	errs := []error{c.Stop(ctx)}
	if c.held != nil {
		c.held.Release()
	}
	if err := os.RemoveAll(c.dir); err != nil {
		errs = append(errs, fmt.Errorf("remove %s: %w", c.dir, err))
	}
	return errors.Join(errs...)
}

// URL is the URL of the maintenance database (user postgres, no
// password: trust authentication on loopback).
func (c *Cluster) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

func (c *Cluster) dataDir() string { return filepath.Join(c.dir, "data") }

func (c *Cluster) start(ctx context.Context) error {
	conns := c.MaxConnections
	if conns <= 0 {
		conns = 200
	}
	opts := fmt.Sprintf("-h 127.0.0.1 -p %d -k %s -c fsync=off -c full_page_writes=off -c max_connections=%d", c.port, c.dir, conns)
	logFile := filepath.Join(c.dir, "pg.log")
	if out, err := c.run(ctx, "pg_ctl", "-D", c.dataDir(), "-l", logFile, "-w", "-t", "60", "-o", opts, "start"); err != nil {
		log, _ := os.ReadFile(logFile)
		if len(log) > 2000 {
			log = log[len(log)-2000:]
		}
		return fmt.Errorf("pg_ctl start on port %d: %v: %s\n%s", c.port, err, out, log)
	}
	return nil
}

// giveToPostgresUser makes the directory the postgres user's and checks
// that user can reach it.
func (c *Cluster) giveToPostgresUser() error {
	u := c.pgUser
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(c.dir, uid, gid); err != nil {
		return fmt.Errorf("chown %s to postgres: %w", c.dir, err)
	}
	for d := filepath.Dir(c.dir); ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("stat %s: %w", d, err)
		}
		if st.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("%s is not traversable by the postgres user; point TMPDIR elsewhere", d)
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// run runs one of the binaries (as the postgres user when we are root)
// and returns its combined output.
func (c *Cluster) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	path := filepath.Join(c.bin, name)
	var cmd *exec.Cmd
	if c.runAs {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, path, args...)
	}
	cmd.Dir = c.dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// the server pg_ctl leaves behind must not hold us on its pipe
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	return bytes.TrimSpace(out.Bytes()), err
}
