package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ErrNoPostgres is wrapped by StartPostgres when there is no local
// PostgreSQL it can run: no binaries (initdb and pg_ctl) found, or, as
// root, no postgres user or no runuser to run them as that user.
var ErrNoPostgres = errors.New("no local PostgreSQL to run")

// Postgres is a throwaway PostgreSQL server started from the local
// binaries for `drover demo --chaos`: a fresh cluster in a temporary
// directory, on a free loopback port, trust authentication, fsync off. When
// the demo runs as root the binaries run as the postgres user (initdb
// refuses root). Close stops it and removes its directory.
type Postgres struct {
	bin   string
	dir   string
	port  int
	runAs bool
}

// StartPostgres starts a throwaway server (about 1–2 s). When there is no
// local PostgreSQL to run, the error wraps ErrNoPostgres.
func StartPostgres(ctx context.Context) (*Postgres, error) {
	bin, looked := postgresBin()
	if bin == "" {
		return nil, fmt.Errorf("demo: %w: no initdb and pg_ctl (looked in %s)", ErrNoPostgres, looked)
	}
	p := &Postgres{bin: bin}
	dir, err := os.MkdirTemp("", "drover-demo-pg-")
	if err != nil {
		return nil, fmt.Errorf("demo: postgres: %w", err)
	}
	p.dir = dir
	if os.Geteuid() == 0 {
		if err := p.giveToPostgresUser(); err != nil {
			p.Close()
			return nil, fmt.Errorf("demo: postgres: %w", err)
		}
	}
	if out, err := p.run(ctx, "initdb", "-D", p.dataDir(), "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--no-locale", "--no-sync"); err != nil {
		p.Close()
		return nil, fmt.Errorf("demo: postgres: initdb: %v: %s", err, out)
	}
	// a free port can be taken between choosing and binding it: try again
	for try := 0; ; try++ {
		if p.port, err = freePort(); err != nil {
			p.Close()
			return nil, err
		}
		err = p.start(ctx)
		if err == nil {
			return p, nil
		}
		if try == 2 || !strings.Contains(err.Error(), "already in use") {
			p.Close()
			return nil, err
		}
	}
}

// URL is the server's maintenance database, which the demo uses as its
// store.
func (p *Postgres) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", p.port)
}

// Close stops the server at once and removes its directory.
func (p *Postgres) Close() error {
	var errs []error
	if _, err := os.Stat(filepath.Join(p.dataDir(), "postmaster.pid")); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if out, err := p.run(ctx, "pg_ctl", "-D", p.dataDir(), "-m", "immediate", "-w", "stop"); err != nil {
			errs = append(errs, fmt.Errorf("demo: stop postgres: %v: %s", err, out))
		}
	}
	if err := os.RemoveAll(p.dir); err != nil {
		errs = append(errs, fmt.Errorf("demo: remove %s: %w", p.dir, err))
	}
	return errors.Join(errs...)
}

func (p *Postgres) dataDir() string { return filepath.Join(p.dir, "data") }

func (p *Postgres) start(ctx context.Context) error {
	opts := fmt.Sprintf("-h 127.0.0.1 -p %d -k %s -c fsync=off -c full_page_writes=off -c max_connections=200", p.port, p.dir)
	logFile := filepath.Join(p.dir, "pg.log")
	if out, err := p.run(ctx, "pg_ctl", "-D", p.dataDir(), "-l", logFile, "-w", "-t", "60", "-o", opts, "start"); err != nil {
		log, _ := os.ReadFile(logFile)
		if len(log) > 2000 {
			log = log[len(log)-2000:]
		}
		return fmt.Errorf("demo: postgres: pg_ctl start on port %d: %v: %s\n%s", p.port, err, out, log)
	}
	return nil
}

// giveToPostgresUser makes the directory the postgres user's, for initdb
// run through runuser.
func (p *Postgres) giveToPostgresUser() error {
	if _, err := exec.LookPath("runuser"); err != nil {
		return fmt.Errorf("%w: running as root, and runuser is not available to run initdb as the postgres user", ErrNoPostgres)
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("%w: running as root and there is no postgres user to run initdb as", ErrNoPostgres)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(p.dir, uid, gid); err != nil {
		return fmt.Errorf("chown %s to postgres: %w", p.dir, err)
	}
	for d := filepath.Dir(p.dir); ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil {
			return err
		}
		if st.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("%s is not traversable by the postgres user; point TMPDIR elsewhere", d)
		}
		if d == filepath.Dir(d) {
			break
		}
	}
	p.runAs = true
	return nil
}

// run runs one of the PostgreSQL binaries (as the postgres user when we
// are root) and returns its combined output.
func (p *Postgres) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	path := filepath.Join(p.bin, name)
	var cmd *exec.Cmd
	if p.runAs {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, path, args...)
	}
	cmd.Dir = p.dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// the server pg_ctl leaves behind must not hold us on its pipe
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	return bytes.TrimSpace(out.Bytes()), err
}

// postgresBin is the newest /usr/lib/postgresql/*/bin holding initdb and
// pg_ctl, else the directory of initdb on PATH; "" and where it looked when
// there is none.
func postgresBin() (dir, looked string) {
	has := func(d string) bool {
		for _, f := range []string{"initdb", "pg_ctl"} {
			if st, err := os.Stat(filepath.Join(d, f)); err != nil || st.IsDir() {
				return false
			}
		}
		return true
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

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("demo: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
