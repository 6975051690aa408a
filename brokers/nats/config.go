package nats

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/internal/redact"
)

// Defaults of the zero values of the configs.
const (
	DefaultURL               = "nats://127.0.0.1:4222"
	DefaultName              = "drover"
	DefaultConnectTimeout    = 5 * time.Second
	DefaultRequestTimeout    = 5 * time.Second
	DefaultReconnectWait     = time.Second
	DefaultAckWait           = 30 * time.Second
	DefaultMaxAckPending     = 1000
	DefaultKeyHeader         = "key"
	DefaultInactiveThreshold = 5 * time.Minute
)

// ConnConfig says how to reach the NATS server. The zero value connects to
// DefaultURL without credentials.
//
// Secrets (Password, Token, the contents of CredsFile) are never logged or
// put into errors: Password and Token are brokers.Secrets, which never
// print, and LogValue and String mask credentials in URLs.
type ConnConfig struct {
	// URLs are the servers to try, each nats://host:port (tls://, ws:// and
	// wss:// are accepted too). Credentials do not belong in a URL: use
	// User/Password, Token or CredsFile. Empty means DefaultURL.
	URLs []string
	// Name is the connection name the server shows. Empty means
	// DefaultName.
	Name string
	// User and Password authenticate with a user name and password.
	User     string
	Password brokers.Secret
	// Token authenticates with a token.
	Token brokers.Secret
	// CredsFile is the path of a .creds file (user JWT and NKey seed).
	CredsFile string
	// ConnectTimeout bounds dialing one server. 0 means
	// DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// RequestTimeout bounds one JetStream API call (consumer create, stream
	// info) when the caller's context has no earlier deadline. 0 means
	// DefaultRequestTimeout.
	RequestTimeout time.Duration
	// ReconnectWait is the pause between reconnect attempts to one server.
	// 0 means DefaultReconnectWait.
	ReconnectWait time.Duration
	// MaxReconnects caps reconnect attempts after a connection loss; 0
	// means no cap (the adapter keeps trying until Close).
	MaxReconnects int
	// Logger receives connection events (lost, back, closed). nil
	// discards them.
	Logger *slog.Logger
}

// Validate reports the first field that cannot be used, by name.
func (c ConnConfig) Validate() error {
	for i, u := range c.URLs {
		if err := validateURL(u); err != nil {
			return fmt.Errorf("URLs[%d] %q: %w", i, redact.URL(u), err)
		}
	}
	if c.Password != "" && c.User == "" {
		return errors.New("Password: set without User")
	}
	n := 0
	for _, set := range []bool{c.User != "", c.Token != "", c.CredsFile != ""} {
		if set {
			n++
		}
	}
	if n > 1 {
		return errors.New("User, Token, CredsFile: set only one way to authenticate")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"ConnectTimeout", c.ConnectTimeout}, {"RequestTimeout", c.RequestTimeout}, {"ReconnectWait", c.ReconnectWait}} {
		if d.v < 0 {
			return fmt.Errorf("%s: %v is negative", d.name, d.v)
		}
	}
	if c.MaxReconnects < 0 {
		return fmt.Errorf("MaxReconnects: %d is negative (0 means no cap)", c.MaxReconnects)
	}
	return nil
}

func (c ConnConfig) withDefaults() ConnConfig {
	if len(c.URLs) == 0 {
		c.URLs = []string{DefaultURL}
	}
	if c.Name == "" {
		c.Name = DefaultName
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.ReconnectWait == 0 {
		c.ReconnectWait = DefaultReconnectWait
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// LogValue shows the config with its secrets redacted.
func (c ConnConfig) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Any("urls", c.shownURLs()),
		slog.String("name", c.Name),
		slog.String("user", c.User),
		slog.String("password", c.Password.String()),
		slog.String("token", c.Token.String()),
		slog.String("creds_file", c.CredsFile),
	)
}

// String shows the config with its secrets redacted.
func (c ConnConfig) String() string {
	return fmt.Sprintf("nats.ConnConfig{URLs:%v Name:%q User:%q Password:%s Token:%s CredsFile:%q}",
		c.shownURLs(), c.Name, c.User, c.Password, c.Token, c.CredsFile)
}

// shownURLs are the URLs with any credentials in them masked: Validate
// refuses those, but a config may be printed before it is validated.
func (c ConnConfig) shownURLs() []string {
	out := make([]string, len(c.URLs))
	for i, u := range c.URLs {
		out[i] = redact.URL(u)
	}
	return out
}

var validSchemes = map[string]bool{"nats": true, "tls": true, "ws": true, "wss": true}

func validateURL(raw string) error {
	if raw == "" {
		return errors.New("empty")
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return errors.New("want scheme://host:port, e.g. nats://127.0.0.1:4222")
	}
	if !validSchemes[u.Scheme] {
		return fmt.Errorf("scheme %q: want nats, tls, ws or wss", u.Scheme)
	}
	if u.User != nil {
		return errors.New("credentials in the URL: use User/Password, Token or CredsFile")
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return errors.New("want scheme://host:port with no path, query or fragment")
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		return errors.New("want host:port after the scheme")
	}
	if host == "" {
		return errors.New("empty host")
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("port %q: want 1-65535", port)
	}
	return nil
}

// KeyConfig says where a message key comes from.
type KeyConfig struct {
	// KeyHeader names the header whose first value is the message key.
	// Empty means DefaultKeyHeader ("key"). Header names match exactly
	// (case-sensitive), as NATS headers are kept.
	KeyHeader string
	// KeyFromSubject, when the key header is missing, takes the last token
	// of the message's subject as its key ("orders.eu.42" → "42").
	KeyFromSubject bool
}

func (k KeyConfig) withDefaults() KeyConfig {
	if k.KeyHeader == "" {
		k.KeyHeader = DefaultKeyHeader
	}
	return k
}

// QueueConfig configures a Queue: a durable pull consumer on a JetStream
// stream.
type QueueConfig struct {
	Conn ConnConfig
	// Stream is the JetStream stream the consumer reads. Required; it must
	// exist.
	Stream string
	// Durable is the durable consumer's name, shared by every slot and node
	// of the source. Required.
	Durable string
	// FilterSubjects restricts the consumer to these subjects (wildcards
	// allowed). Empty means the whole stream.
	FilterSubjects []string
	// AckWait is how long a delivered message stays in flight before the
	// server delivers it again. 0 means DefaultAckWait.
	AckWait time.Duration
	// MaxAckPending caps the messages in flight across all slots. 0 means
	// DefaultMaxAckPending.
	MaxAckPending int
	// Start is where a consumer created by NewQueue begins: Earliest
	// delivers the whole stream, Latest only messages stored after it is
	// created. It does not change a consumer that exists.
	Start brokers.StartMode
	// BindOnly binds to an existing consumer and never creates or updates
	// one (for consumers managed outside drover). Then AckWait,
	// MaxAckPending, FilterSubjects and Start are the consumer's own.
	BindOnly bool
	// DoubleAck waits for the server to confirm each ack (one round trip
	// per message, ~7x slower). Without it Ack sends the batch's acks and
	// waits until the server has received them (one flush per batch).
	DoubleAck bool
	Key       KeyConfig
}

// Validate reports the first field that cannot be used, by name.
func (c QueueConfig) Validate() error {
	if err := c.Conn.Validate(); err != nil {
		return fmt.Errorf("nats queue config: Conn.%w", err)
	}
	if err := validateName("Stream", c.Stream); err != nil {
		return fmt.Errorf("nats queue config: %w", err)
	}
	if err := validateName("Durable", c.Durable); err != nil {
		return fmt.Errorf("nats queue config: %w", err)
	}
	if err := validateSubjects("FilterSubjects", c.FilterSubjects); err != nil {
		return fmt.Errorf("nats queue config: %w", err)
	}
	if c.AckWait < 0 {
		return fmt.Errorf("nats queue config: AckWait: %v is negative", c.AckWait)
	}
	if c.AckWait > 0 && c.AckWait < time.Millisecond {
		return fmt.Errorf("nats queue config: AckWait: %v is below 1ms", c.AckWait)
	}
	if c.MaxAckPending < 0 {
		return fmt.Errorf("nats queue config: MaxAckPending: %d is negative", c.MaxAckPending)
	}
	if c.Start != brokers.Earliest && c.Start != brokers.Latest {
		return fmt.Errorf("nats queue config: Start: unknown mode %d", c.Start)
	}
	return nil
}

func (c QueueConfig) withDefaults() QueueConfig {
	c.Conn = c.Conn.withDefaults()
	if c.AckWait == 0 {
		c.AckWait = DefaultAckWait
	}
	if c.MaxAckPending == 0 {
		c.MaxAckPending = DefaultMaxAckPending
	}
	c.Key = c.Key.withDefaults()
	return c
}

// StreamConfig configures a Stream: a JetStream stream read in order with
// drover keeping the position.
type StreamConfig struct {
	Conn ConnConfig
	// Stream is the JetStream stream to read. Required; it must exist.
	Stream string
	// Subjects are the partitions: one partition per subject filter, whose
	// ID is the filter itself. They must not overlap (a message matching
	// two would be read by two units). Empty means the stream's own
	// subjects, looked up at every Partitions call, so a subject added to
	// the stream becomes a new partition.
	Subjects []string
	// InactiveThreshold is how long the server keeps a reader's consumer
	// after its last fetch when the reader is not closed (a crashed
	// process). 0 means DefaultInactiveThreshold.
	InactiveThreshold time.Duration
	Key               KeyConfig
}

// Validate reports the first field that cannot be used, by name.
func (c StreamConfig) Validate() error {
	if err := c.Conn.Validate(); err != nil {
		return fmt.Errorf("nats stream config: Conn.%w", err)
	}
	if err := validateName("Stream", c.Stream); err != nil {
		return fmt.Errorf("nats stream config: %w", err)
	}
	if err := validateSubjects("Subjects", c.Subjects); err != nil {
		return fmt.Errorf("nats stream config: %w", err)
	}
	if c.InactiveThreshold < 0 {
		return fmt.Errorf("nats stream config: InactiveThreshold: %v is negative", c.InactiveThreshold)
	}
	return nil
}

func (c StreamConfig) withDefaults() StreamConfig {
	c.Conn = c.Conn.withDefaults()
	if c.InactiveThreshold == 0 {
		c.InactiveThreshold = DefaultInactiveThreshold
	}
	c.Key = c.Key.withDefaults()
	return c
}

// validateName checks a stream or consumer name as the server does.
func validateName(field, name string) error {
	if name == "" {
		return fmt.Errorf("%s: required", field)
	}
	if strings.ContainsAny(name, " \t\r\n.*>/\\") {
		return fmt.Errorf("%s %q: must not contain whitespace, '.', '*', '>', '/' or '\\'", field, name)
	}
	return nil
}

func validateSubjects(field string, subjects []string) error {
	seen := map[string]bool{}
	for i, s := range subjects {
		if err := validateSubject(s); err != nil {
			return fmt.Errorf("%s[%d] %q: %w", field, i, s, err)
		}
		if seen[s] {
			return fmt.Errorf("%s[%d] %q: listed twice", field, i, s)
		}
		seen[s] = true
	}
	return nil
}

func validateSubject(s string) error {
	if s == "" {
		return errors.New("empty")
	}
	if strings.ContainsAny(s, " \t\r\n") {
		return errors.New("contains whitespace")
	}
	tokens := strings.Split(s, ".")
	for i, t := range tokens {
		switch {
		case t == "":
			return errors.New("empty token")
		case t == ">" && i != len(tokens)-1:
			return errors.New("'>' must be the last token")
		case len(t) > 1 && strings.ContainsAny(t, "*>"):
			return fmt.Errorf("token %q: a wildcard must be a whole token", t)
		}
	}
	return nil
}
