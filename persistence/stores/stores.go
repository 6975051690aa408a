package stores

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/drover-dev/drover/internal/clock"
	"github.com/drover-dev/drover/internal/redact"
	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/persistence/memory"
	"github.com/drover-dev/drover/persistence/postgres"
	"github.com/drover-dev/drover/persistence/sqlite"
)

// Options apply to whichever store the URL names. The zero value means the
// defaults.
type Options struct {
	// Logger receives the store's messages (migrations); nil discards.
	Logger *slog.Logger
	// Clock is the time of the stores that keep their own (sqlite, memory);
	// nil means the wall clock. PostgreSQL always uses the server's now().
	Clock clock.Clock
	// Timeout bounds every call of a SQL store and sets its lock waits
	// (postgres.Config.Timeout, sqlite.Config.Timeout); 0: their default,
	// 10 s. The memory store never waits and ignores it.
	Timeout time.Duration
	// MaxConns caps the PostgreSQL pool (postgres.Config.MaxConns); 0: the
	// pool's default. SQLite uses one connection; memory none.
	MaxConns int
	// MustExist refuses a SQLite file that does not exist instead of
	// creating it (the error wraps fs.ErrNotExist): tools that inspect or
	// change a store (drover dlq) must not create one at a mistyped path.
	// A PostgreSQL database must exist anyway.
	MustExist bool
	// ReadOnly opens the store read-only: nothing is created, migrated or
	// written. SQLite opens the file read-only (sqlite.Config.ReadOnly, and
	// MustExist); PostgreSQL starts every connection read-only
	// (postgres.Config.ReadOnly) and requires the schema at this drover's
	// version.
	ReadOnly bool
}

// Kind is the store a URL names.
type Kind string

const (
	Postgres Kind = "postgres"
	SQLite   Kind = "sqlite"
	Memory   Kind = "memory"
)

const accepted = "postgres://, postgresql://, sqlite:PATH or memory:"

// Target is a parsed store URL.
type Target struct {
	Kind Kind
	// Path is the SQLite file's path, or the whole PostgreSQL URL.
	Path string
}

// Parse checks a store URL and says which store it names. Its errors show
// the URL as redact.URL masks it (passwords, ?password= and the like
// replaced by xxxxx), cut to 100 bytes. A PostgreSQL URL with more than
// one '@' is refused (redact.ErrUnescapedAt) and not shown at all: pgx
// would take the rest of the password for the host.
func Parse(raw string) (Target, error) {
	if strings.TrimSpace(raw) == "" {
		return Target{}, fmt.Errorf("store URL is empty: want %s", accepted)
	}
	scheme, rest, ok := strings.Cut(raw, ":")
	if !ok || !schemeRE.MatchString(scheme) {
		return Target{}, fmt.Errorf("store URL %s has no scheme: want %s", show(raw), accepted)
	}
	switch strings.ToLower(scheme) {
	case "postgres", "postgresql":
		return parsePostgres(raw, rest)
	case "sqlite":
		return parseSQLite(raw, rest)
	case "memory":
		if rest != "" {
			return Target{}, fmt.Errorf("store URL %s: memory: takes no path or options", show(raw))
		}
		return Target{Kind: Memory}, nil
	}
	return Target{}, fmt.Errorf("store URL %s: unknown scheme %q: want %s", show(raw), scheme, accepted)
}

var schemeRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+-]*$`)

// show is how an error shows a store URL: masked, quoted, and cut short.
func show(raw string) string {
	s := redact.URL(raw)
	if len(s) > 100 {
		s = s[:100] + "…"
	}
	return strconv.Quote(s)
}

func parsePostgres(raw, rest string) (Target, error) {
	if err := redact.CheckAt(raw); err != nil {
		// show would mask up to the last '@', but say nothing of a
		// password that pgx would split elsewhere
		return Target{}, fmt.Errorf("store URL: %w", err)
	}
	if !strings.HasPrefix(rest, "//") {
		return Target{}, fmt.Errorf("store URL %s: want postgres://[user[:password]@]host[:port]/database", show(raw))
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url's error quotes the URL, password included.
		return Target{}, fmt.Errorf("store URL %s: not a valid URL", show(raw))
	}
	if u.Host == "" && u.Query().Get("host") == "" {
		return Target{}, fmt.Errorf("store URL %s: no host", show(raw))
	}
	if strings.Trim(u.Path, "/") == "" && u.Query().Get("dbname") == "" {
		return Target{}, fmt.Errorf("store URL %s: no database name (postgres://host/DATABASE)", show(raw))
	}
	return Target{Kind: Postgres, Path: raw}, nil
}

func parseSQLite(raw, rest string) (Target, error) {
	path := rest
	if strings.HasPrefix(rest, "//") {
		// URL style: sqlite:///abs/path has an empty host.
		if !strings.HasPrefix(rest, "///") {
			return Target{}, fmt.Errorf("store URL %s: a sqlite URL has no host: want sqlite:///absolute/path or sqlite:relative/path", show(raw))
		}
		path = rest[2:]
	}
	switch {
	case path == "":
		return Target{}, fmt.Errorf("store URL %s: empty path: want sqlite:PATH, e.g. sqlite:./drover.db", show(raw))
	case strings.ContainsAny(path, "?#"):
		return Target{}, fmt.Errorf("store URL %s: sqlite takes no options ('?' or '#'); drover sets them", show(raw))
	case strings.HasSuffix(path, "/"):
		return Target{}, fmt.Errorf("store URL %s: the path names a directory; want a file", show(raw))
	}
	return Target{Kind: SQLite, Path: path}, nil
}

// Open opens the store the URL names (see Parse), migrating it when it is
// a database. Its errors never show a secret of the URL.
func Open(ctx context.Context, rawURL string, opts Options) (persistence.Store, error) {
	t, err := Parse(rawURL)
	if err != nil {
		return nil, err
	}
	if opts.MaxConns < 0 || opts.MaxConns > math.MaxInt32 {
		return nil, fmt.Errorf("store max conns %d: must be between 0 and %d", opts.MaxConns, math.MaxInt32)
	}
	switch t.Kind {
	case Postgres:
		s, err := postgres.Open(ctx, t.Path, postgres.Config{Logger: opts.Logger, Timeout: opts.Timeout, MaxConns: int32(opts.MaxConns),
			ReadOnly: opts.ReadOnly})
		if err != nil {
			return nil, scrub(rawURL, err)
		}
		return s, nil
	case SQLite:
		s, err := sqlite.Open(ctx, t.Path, sqlite.Config{Clock: opts.Clock, Logger: opts.Logger, Timeout: opts.Timeout,
			MustExist: opts.MustExist, ReadOnly: opts.ReadOnly})
		if err != nil {
			return nil, err
		}
		return s, nil
	default:
		return memory.New(memory.Config{Clock: opts.Clock}), nil
	}
}

// scrub takes the secrets of rawURL out of err's text: pgx masks the
// passwords it recognizes, but whatever a library quotes of the URL, no
// secret of it shows.
func scrub(rawURL string, err error) error {
	if secrets := redact.Secrets(rawURL); len(secrets) > 0 && err != nil {
		return scrubbed{err, redact.Scrub(err.Error(), secrets...)}
	}
	return err
}

// scrubbed is an error whose text had the URL's secrets taken out; it
// still unwraps to the original, for errors.Is and errors.As.
type scrubbed struct {
	err error
	msg string
}

func (e scrubbed) Error() string { return e.msg }
func (e scrubbed) Unwrap() error { return e.err }
