package kafka

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
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

// Config configures a Stream. Zero values mean the defaults.
type Config struct {
	// Brokers are the seed brokers, each "host:port" (no scheme).
	// Required.
	Brokers []string
	// Topic is the topic read as a stream. Required.
	Topic string
	// ClientID identifies drover to the brokers. Default "drover".
	ClientID string
	// TLS, when enabled, encrypts connections.
	TLS TLS
	// SASL, when a mechanism is set, authenticates connections.
	SASL SASL
	// FetchMaxBytes bounds one fetch response. Default 50 MiB.
	FetchMaxBytes int32
	// FetchMaxPartitionBytes bounds one partition of a fetch response.
	// Default 1 MiB.
	FetchMaxPartitionBytes int32
	// RequestTimeout bounds a metadata, offset or commit request, retries
	// included. Default 10 s.
	RequestTimeout time.Duration
	// CommitToGroup, when set, is the Kafka consumer group Stream.Committed
	// writes drover's positions to, so that broker-side lag tools see
	// drover's progress. drover never reads it back.
	CommitToGroup string
	// ReadUncommitted reads the records of open and aborted transactions
	// too (Kafka's isolation.level=read_uncommitted). By default a reader
	// is read_committed: it returns only the records of committed
	// transactions (and records written outside transactions), and stays
	// behind the last stable offset while a transaction is open.
	ReadUncommitted bool
	// Logger receives the adapter's and the client library's logs. nil
	// discards them. Secrets are never logged.
	Logger *slog.Logger
}

// TLS configures encrypted connections.
type TLS struct {
	Enable bool
	// CAFile is a PEM file of CAs to trust instead of the system's.
	CAFile string
	// CertFile and KeyFile are a PEM client certificate and its key, for
	// mutual TLS. Both or neither.
	CertFile, KeyFile string
	// InsecureSkipVerify accepts any server certificate. Tests only.
	InsecureSkipVerify bool
}

// SASL configures authentication. Password is never logged or printed.
type SASL struct {
	// Mechanism is "plain", "scram-sha-256" or "scram-sha-512"; empty
	// disables SASL.
	Mechanism string
	User      string
	Password  string
}

// String prints the SASL settings without the password.
func (s SASL) String() string {
	pw := ""
	if s.Password != "" {
		pw = "[redacted]"
	}
	return fmt.Sprintf("{Mechanism:%s User:%s Password:%s}", s.Mechanism, s.User, pw)
}

// GoString is String, so that %#v does not print the password either.
func (s SASL) GoString() string { return "kafka.SASL" + s.String() }

// LogValue keeps the password out of structured logs.
func (s SASL) LogValue() slog.Value {
	return slog.GroupValue(slog.String("mechanism", s.Mechanism), slog.String("user", s.User))
}

// Validate reports every problem of c, each naming its field.
func (c Config) Validate() error {
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("brokers: required"))
	}
	for i, b := range c.Brokers {
		if err := validateBroker(b); err != nil {
			errs = append(errs, fmt.Errorf("brokers[%d] %q: %w", i, b, err))
		}
	}
	if strings.TrimSpace(c.Topic) == "" {
		errs = append(errs, errors.New("topic: required"))
	}
	switch strings.ToLower(c.SASL.Mechanism) {
	case "":
	case MechanismPlain, MechanismSCRAMSHA256, MechanismSCRAMSHA512:
		if c.SASL.User == "" {
			errs = append(errs, errors.New("sasl.user: required with a mechanism"))
		}
	default:
		errs = append(errs, fmt.Errorf("sasl.mechanism %q: want plain, scram-sha-256 or scram-sha-512", c.SASL.Mechanism))
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		errs = append(errs, errors.New("tls: cert_file and key_file go together"))
	}
	if !c.TLS.Enable && (c.TLS.CAFile != "" || c.TLS.CertFile != "" || c.TLS.InsecureSkipVerify) {
		errs = append(errs, errors.New("tls: files or insecure_skip_verify set but tls is not enabled"))
	}
	if c.FetchMaxBytes < 0 {
		errs = append(errs, fmt.Errorf("fetch_max_bytes: %d is negative", c.FetchMaxBytes))
	}
	if c.FetchMaxPartitionBytes < 0 {
		errs = append(errs, fmt.Errorf("fetch_max_partition_bytes: %d is negative", c.FetchMaxPartitionBytes))
	}
	if c.RequestTimeout < 0 {
		errs = append(errs, fmt.Errorf("request_timeout: %v is negative", c.RequestTimeout))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("kafka config: %w", err)
	}
	return nil
}

// validateBroker accepts "host:port" with a port in 1..65535 and no scheme,
// path or credentials.
func validateBroker(b string) error {
	if strings.Contains(b, "://") {
		return errors.New("must be host:port without a scheme")
	}
	if strings.ContainsAny(b, "/@?# \t") {
		return errors.New("must be host:port, nothing else")
	}
	host, port, err := net.SplitHostPort(b)
	if err != nil {
		return errors.New("must be host:port")
	}
	if host == "" {
		return errors.New("host is empty")
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("port %q is not in 1..65535", port)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.ClientID == "" {
		c.ClientID = DefaultClientID
	}
	if c.FetchMaxBytes == 0 {
		c.FetchMaxBytes = DefaultFetchMaxBytes
	}
	if c.FetchMaxPartitionBytes == 0 {
		c.FetchMaxPartitionBytes = DefaultFetchMaxPartitionBytes
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.SASL.Mechanism = strings.ToLower(c.SASL.Mechanism)
	return c
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
