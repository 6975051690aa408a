package kafka

import (
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/drover-dev/drover/brokers"
)

// Defaults for zero Config fields.
const (
	DefaultClientID               = "drover"
	DefaultRequestTimeout         = 10 * time.Second
	DefaultFetchMaxBytes          = 50 << 20
	DefaultFetchMaxPartitionBytes = 1 << 20
)

// SASL mechanisms.
const (
	MechanismPlain       = "plain"
	MechanismSCRAMSHA256 = "scram-sha-256"
	MechanismSCRAMSHA512 = "scram-sha-512"
)

// Isolation levels.
const (
	ReadCommitted   = "read_committed"
	ReadUncommitted = "read_uncommitted"
)

// Config configures a Stream. Zero values mean the defaults.
//
// It is also the kafka section of a node's config file (architecture §9):
// the yaml tags are the file's names, cluster/config reads the section
// into it and reports Validate's problems under sources[i].kafka. A
// setting is added here and nowhere else: a field with its tag, its check
// in Validate, its default in withDefaults, and what it sets on the
// client in clientOpts.
type Config struct {
	// Brokers are the seed brokers, each "host:port" (no scheme).
	// Required.
	Brokers []string `yaml:"brokers" json:"brokers"`
	// Topic is the topic read as a stream. Required.
	Topic string `yaml:"topic" json:"topic"`
	// ClientID identifies drover to the brokers. Default "drover".
	ClientID string `yaml:"client_id" json:"client_id,omitempty"`
	// TLS, when enabled, encrypts connections.
	TLS TLS `yaml:"tls" json:"tls,omitzero"`
	// SASL, when a mechanism is set, authenticates connections.
	SASL SASL `yaml:"sasl" json:"sasl,omitzero"`
	// FetchMaxBytes bounds one fetch response. Default 50 MiB.
	FetchMaxBytes int32 `yaml:"fetch_max_bytes" json:"fetch_max_bytes,omitempty"`
	// FetchMaxPartitionBytes bounds one partition of a fetch response.
	// Default 1 MiB. Not a config file setting.
	FetchMaxPartitionBytes int32 `yaml:"-" json:"-"`
	// RequestTimeout bounds a metadata, offset or commit request, retries
	// included. Default 10 s. Not a config file setting.
	RequestTimeout time.Duration `yaml:"-" json:"-"`
	// CommitToGroup, when set, is the Kafka consumer group Stream.Committed
	// writes drover's positions to, so that broker-side lag tools see
	// drover's progress. drover never reads it back.
	CommitToGroup string `yaml:"commit_to_group" json:"commit_to_group,omitempty"`
	// Isolation is ReadCommitted (the default, also when empty): a reader
	// returns only the records of committed transactions (and records
	// written outside transactions), and stays behind the last stable
	// offset while a transaction is open. ReadUncommitted reads the
	// records of open and aborted transactions too (Kafka's
	// isolation.level=read_uncommitted).
	Isolation string `yaml:"isolation" json:"isolation,omitempty"`
	// Rack is where this node runs (an availability zone, say: the
	// brokers' broker.rack names): fetches then read from the replica in
	// the same rack when the cluster has a replica.selector.class that
	// picks one (KIP-392), saving cross-zone traffic. Empty: the leader.
	Rack string `yaml:"rack" json:"rack,omitempty"`
	// Logger receives the adapter's and the client library's logs. nil
	// discards them. Secrets are never logged.
	Logger *slog.Logger `yaml:"-" json:"-"`
}

// TLS configures encrypted connections.
type TLS struct {
	Enable bool `yaml:"enabled" json:"enabled"`
	// CAFile is a PEM file of CAs to trust instead of the system's.
	CAFile string `yaml:"ca_file" json:"ca_file,omitempty"`
	// CertFile and KeyFile are a PEM client certificate and its key, for
	// mutual TLS. Both or neither.
	CertFile string `yaml:"cert_file" json:"cert_file,omitempty"`
	KeyFile  string `yaml:"key_file" json:"key_file,omitempty"`
	// InsecureSkipVerify accepts any server certificate. Tests only.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify" json:"insecure_skip_verify,omitempty"`
}

// SASL configures authentication. Password is never logged or printed.
type SASL struct {
	// Mechanism is "plain", "scram-sha-256" or "scram-sha-512" (any
	// case); empty disables SASL. With a mechanism, User and Password are
	// required.
	Mechanism string         `yaml:"mechanism" json:"mechanism"`
	User      string         `yaml:"username" json:"username"`
	Password  brokers.Secret `yaml:"password" json:"password"`
}

// Format prints the config whatever the verb with its secrets masked: fmt
// would print a *Config inside another value with %s or %q through a path
// that ignores Secret's methods.
func (c Config) Format(f fmt.State, verb rune) {
	type view Config
	fmt.Fprintf(f, fmt.FormatString(f, verb), view(c))
}

// Format prints the settings whatever the verb with the password masked
// (see Config.Format).
func (s SASL) Format(f fmt.State, verb rune) {
	type view SASL
	fmt.Fprintf(f, fmt.FormatString(f, verb), view(s))
}

var topicRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,249}$`)

// Validate reports every problem of c, each at the path of its field in
// the config file's names, as brokers.FieldErrors wrapped in "kafka
// config: ".
func (c Config) Validate() error {
	var e brokers.FieldErrors
	if len(c.Brokers) == 0 {
		e.Add("brokers", "required: at least one host:port")
	}
	for i, b := range c.Brokers {
		checkBroker(&e, fmt.Sprintf("brokers[%d]", i), b)
	}
	switch {
	case strings.TrimSpace(c.Topic) == "":
		e.Add("topic", "required")
	case !topicRE.MatchString(c.Topic) || c.Topic == "." || c.Topic == "..":
		e.Add("topic", "%q must be 1 to 249 letters, digits, '.', '_' or '-'", c.Topic)
	}
	if c.FetchMaxBytes < 0 {
		e.Add("fetch_max_bytes", "must not be negative, not %d", c.FetchMaxBytes)
	}
	if c.FetchMaxPartitionBytes < 0 {
		e.Add("fetch_max_partition_bytes", "must not be negative, not %d", c.FetchMaxPartitionBytes)
	}
	if c.RequestTimeout < 0 {
		e.Add("request_timeout", "must not be negative, not %v", c.RequestTimeout)
	}
	if c.Isolation != "" && c.Isolation != ReadCommitted && c.Isolation != ReadUncommitted {
		e.Add("isolation", "must be one of %s, %s, not %q", ReadCommitted, ReadUncommitted, c.Isolation)
	}
	if t := c.TLS; !t.Enable && (t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.InsecureSkipVerify) {
		e.Add("tls.enabled", "must be true when other tls settings are given")
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		e.Add("tls", "cert_file and key_file go together")
	}
	if s := c.SASL; s.Mechanism != "" || s.User != "" || s.Password != "" {
		switch strings.ToLower(s.Mechanism) {
		case MechanismPlain, MechanismSCRAMSHA256, MechanismSCRAMSHA512:
		case "":
			e.Add("sasl.mechanism", "required: one of plain, scram-sha-256, scram-sha-512")
		default:
			e.Add("sasl.mechanism", "must be one of plain, scram-sha-256, scram-sha-512, not %q", s.Mechanism)
		}
		if strings.TrimSpace(s.User) == "" {
			e.Add("sasl.username", "required")
		}
		if strings.TrimSpace(s.Password.Reveal()) == "" {
			e.Add("sasl.password", "required")
		}
	}
	return e.Err("kafka config")
}

// checkBroker accepts "host:port" with a host and a port in 1..65535, and
// no scheme.
func checkBroker(e *brokers.FieldErrors, path, b string) {
	if strings.Contains(b, "://") {
		e.Add(path, "%q must be host:port, without a URL scheme", b)
		return
	}
	host, port, err := net.SplitHostPort(b)
	if err != nil {
		e.Add(path, "%q must be host:port", b)
		return
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		e.Add(path, "%q: port %q must be a number from 1 to 65535", b, port)
		return
	}
	switch {
	case host == "":
		e.Add(path, "%q: host is missing", b)
	case strings.ContainsAny(host, " \t/@?#"):
		e.Add(path, "%q: %q is not a host name or IP address", b, host)
	}
}

func (c Config) withDefaults() Config {
	c.ClientID = cmp.Or(c.ClientID, DefaultClientID)
	c.FetchMaxBytes = cmp.Or(c.FetchMaxBytes, DefaultFetchMaxBytes)
	c.FetchMaxPartitionBytes = cmp.Or(c.FetchMaxPartitionBytes, DefaultFetchMaxPartitionBytes)
	c.RequestTimeout = cmp.Or(c.RequestTimeout, DefaultRequestTimeout)
	c.Isolation = cmp.Or(c.Isolation, ReadCommitted)
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
	c.SASL.Mechanism = strings.ToLower(c.SASL.Mechanism)
	return c
}

func (c Config) readUncommitted() bool { return c.Isolation == ReadUncommitted }

// clientOpts are the options of every client of a Config with its
// defaults: where and how to connect.
func (c Config) clientOpts() ([]kgo.Opt, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.Brokers...),
		kgo.ClientID(c.ClientID),
		kgo.RetryTimeout(c.RequestTimeout),
		kgo.DialTimeout(min(c.RequestTimeout, DefaultRequestTimeout)),
		kgo.WithLogger(kgoLogger{c.Logger}),
	}
	if c.Rack != "" {
		opts = append(opts, kgo.Rack(c.Rack))
	}
	tc, err := c.TLS.tlsConfig()
	if err != nil {
		return nil, err
	}
	if tc != nil {
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	user, pass := c.SASL.User, c.SASL.Password.Reveal()
	switch c.SASL.Mechanism {
	case MechanismPlain:
		opts = append(opts, kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism()))
	case MechanismSCRAMSHA256:
		opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()))
	case MechanismSCRAMSHA512:
		opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()))
	}
	return opts, nil
}

// tlsConfig builds the client TLS config, or nil when TLS is off.
func (t TLS) tlsConfig() (*tls.Config, error) {
	if !t.Enable {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: t.InsecureSkipVerify} //nolint:gosec // opt-in, for tests
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tls.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls.ca_file %s: no PEM certificate found", t.CAFile)
		}
		cfg.RootCAs = pool
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tls.cert_file/key_file: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
