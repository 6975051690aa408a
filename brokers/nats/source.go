package nats

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/internal/redact"
)

// Modes of a SourceConfig.
const (
	// ModeQueue reads the stream through a durable pull consumer
	// (NewQueue).
	ModeQueue = "queue"
	// ModeStream reads the stream in order, drover keeping the position
	// (NewStream).
	ModeStream = "stream"
)

// SourceConfig is the nats section of a node's config file (architecture
// §9): one section for both shapes, the connection settings with the
// stream's or the queue's. The yaml tags are the file's names;
// cluster/config reads the section into it (defaulting Mode to queue and
// Consumer to "drover-<source name>") and reports Validate's problems
// under sources[i].nats. QueueConfig and StreamConfig give the configs
// NewQueue and NewStream take.
type SourceConfig struct {
	// URL is one or more comma-separated nats:// (or tls://, ws://, wss://)
	// server URLs. Credentials written into one (user:password@, or a user
	// name alone, which NATS reads as a token) are moved to their own
	// fields by Conn; a config file takes them only through references.
	URL     brokers.SecretURL `yaml:"url" json:"url"`
	Stream  string            `yaml:"stream" json:"stream"`
	Subject string            `yaml:"subject" json:"subject,omitempty"` // filter subject; empty: all
	Mode    string            `yaml:"mode" json:"mode"`                 // ModeQueue | ModeStream
	// Consumer is the durable consumer's name (queue mode).
	Consumer        string         `yaml:"consumer" json:"consumer,omitempty"`
	AckWait         time.Duration  `yaml:"ack_wait" json:"ack_wait,omitempty"`               // queue mode; 0: DefaultAckWait
	MaxAckPending   int            `yaml:"max_ack_pending" json:"max_ack_pending,omitempty"` // queue mode; 0: DefaultMaxAckPending
	CredentialsFile string         `yaml:"credentials_file" json:"credentials_file,omitempty"`
	User            string         `yaml:"user" json:"user,omitempty"`
	Password        brokers.Secret `yaml:"password" json:"password,omitempty"`

	// Logger receives connection events. nil discards them.
	Logger *slog.Logger `yaml:"-" json:"-"`
}

// IsQueue reports whether the section reads through a durable consumer.
func (c SourceConfig) IsQueue() bool { return c.Mode == ModeQueue }

// Format prints the config whatever the verb with its secrets masked: fmt
// would print a *SourceConfig inside another value with %s or %q through
// a path that ignores the methods of Secret and SecretURL.
func (c SourceConfig) Format(f fmt.State, verb rune) {
	type view SourceConfig
	fmt.Fprintf(f, fmt.FormatString(f, verb), view(c))
}

// nameRE is a JetStream stream or consumer name: no whitespace, '.', '*',
// '>', or path separators.
var nameRE = regexp.MustCompile(`^[^\s.*>/\\]+$`)

// Validate reports every field that cannot be used, at its path in the
// config file's names, as brokers.FieldErrors wrapped in "nats: ". A bad
// URL entry is quoted as internal/redact masks it.
func (c SourceConfig) Validate() error {
	var e brokers.FieldErrors
	if strings.TrimSpace(c.URL.Reveal()) == "" {
		e.Add("url", "required")
	} else {
		for i, part := range strings.Split(c.URL.Reveal(), ",") {
			if err := redact.CheckAt(part); err != nil {
				e.Add("url", "entry %d: %v", i+1, err)
				continue
			}
			part = strings.TrimSpace(part)
			u, err := url.Parse(part)
			if err != nil || u.Host == "" || !validSchemes[u.Scheme] {
				e.Add("url", "entry %d (%q) must be nats://host:port (or tls://, ws://, wss://)", i+1, redact.URL(part))
			}
		}
	}
	switch {
	case c.Stream == "":
		e.Add("stream", "required")
	case !nameRE.MatchString(c.Stream):
		e.Add("stream", "%q must not contain spaces, '.', '*', '>' or path separators", c.Stream)
	}
	switch c.Mode {
	case ModeQueue, ModeStream:
	case "":
		e.Add("mode", "required: one of %s, %s", ModeQueue, ModeStream)
	default:
		e.Add("mode", "must be one of %s, %s, not %q", ModeQueue, ModeStream, c.Mode)
	}
	if c.Mode == ModeStream {
		if c.Consumer != "" {
			e.Add("consumer", "only valid with mode: queue")
		}
		if c.AckWait != 0 {
			e.Add("ack_wait", "only valid with mode: queue")
		}
		if c.MaxAckPending != 0 {
			e.Add("max_ack_pending", "only valid with mode: queue")
		}
	}
	if c.Consumer != "" && !nameRE.MatchString(c.Consumer) {
		e.Add("consumer", "%q must not contain spaces, '.', '*', '>' or path separators", c.Consumer)
	}
	if c.Subject != "" {
		if err := validateSubject(c.Subject); err != nil {
			e.Add("subject", "%q: %v", c.Subject, err)
		}
	}
	switch {
	case c.AckWait < 0:
		e.Add("ack_wait", "must not be negative, not %v", c.AckWait)
	case c.AckWait > 0 && c.AckWait < time.Millisecond:
		e.Add("ack_wait", "must be at least 1ms (or 0 for the default %v), not %v", DefaultAckWait, c.AckWait)
	}
	if c.MaxAckPending < 0 {
		e.Add("max_ack_pending", "must not be negative, not %d", c.MaxAckPending)
	}
	switch {
	case c.CredentialsFile != "" && (c.User != "" || c.Password != ""):
		e.Add("credentials_file", "use credentials_file or user and password, not both")
	case c.User != "" && c.Password == "":
		e.Add("password", "required with user")
	case c.User == "" && c.Password != "":
		e.Add("user", "required with password")
	}
	if !slices.ContainsFunc(e, func(fe brokers.FieldError) bool { return fe.Path == "url" }) {
		if _, err := c.Conn(); err != nil {
			e.Add("url", "%s", strings.TrimPrefix(err.Error(), "nats.url: "))
		}
	}
	return e.Err("nats")
}

// Conn is the connection config of the section: URL split into its
// entries, with the credentials written into an entry moved to their own
// fields (ConnConfig refuses URLs with credentials, so that they never
// show in its logs): user:password@ to User and Password, unless those
// are set, and a user name alone to Token, as NATS itself reads
// nats://TOKEN@host.
func (c SourceConfig) Conn() (ConnConfig, error) {
	conn := ConnConfig{User: c.User, Password: c.Password, CredsFile: c.CredentialsFile, Logger: c.Logger}
	for i, raw := range strings.Split(c.URL.Reveal(), ",") {
		raw = strings.TrimSpace(raw)
		u, err := url.Parse(raw) // its error would quote the URL
		if err != nil {
			return conn, fmt.Errorf("nats.url[%d] %s: not a URL", i, redact.URL(raw))
		}
		if u.User != nil {
			if p, ok := u.User.Password(); ok {
				if conn.User == "" {
					conn.User = u.User.Username()
				}
				if conn.Password == "" {
					conn.Password = brokers.Secret(p)
				}
			} else if conn.Token == "" {
				conn.Token = brokers.Secret(u.User.Username())
			}
			u.User = nil
		}
		conn.URLs = append(conn.URLs, u.String())
	}
	if conn.Token != "" && (conn.User != "" || conn.CredsFile != "") {
		return conn, errors.New("nats.url: a token (a user name alone in the URL) and user, password or credentials_file: use one")
	}
	return conn, nil
}

// QueueConfig is the config NewQueue takes for the section (queue mode),
// validated; start is where a consumer NewQueue creates begins (the
// source's start, a setting outside the section).
func (c SourceConfig) QueueConfig(start brokers.StartMode) (QueueConfig, error) {
	conn, err := c.Conn()
	if err != nil {
		return QueueConfig{}, err
	}
	q := QueueConfig{Conn: conn, Stream: c.Stream, Durable: c.Consumer, FilterSubjects: c.subjects(),
		AckWait: c.AckWait, MaxAckPending: c.MaxAckPending, Start: start}
	if err := q.Validate(); err != nil {
		return QueueConfig{}, err
	}
	return q, nil
}

// StreamConfig is the config NewStream takes for the section (stream
// mode), validated: the subject, if any, is its one partition.
func (c SourceConfig) StreamConfig() (StreamConfig, error) {
	conn, err := c.Conn()
	if err != nil {
		return StreamConfig{}, err
	}
	s := StreamConfig{Conn: conn, Stream: c.Stream, Subjects: c.subjects()}
	if err := s.Validate(); err != nil {
		return StreamConfig{}, err
	}
	return s, nil
}

func (c SourceConfig) subjects() []string {
	if c.Subject == "" {
		return nil
	}
	return []string{c.Subject}
}
