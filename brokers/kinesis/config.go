package kinesis

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"
)

// Defaults and limits of Config.
const (
	// DefaultPollInterval is the shortest time between two GetRecords calls
	// of one reader: Kinesis allows 5 per second per shard.
	DefaultPollInterval = 200 * time.Millisecond
	// DefaultThrottleBackoff is the first pause after Kinesis refused a
	// GetRecords for throughput; it doubles while refusals go on, up to
	// MaxThrottleBackoff.
	DefaultThrottleBackoff = time.Second
	// MaxThrottleBackoff caps the pause after repeated refusals.
	MaxThrottleBackoff = 10 * time.Second
	// DefaultMaxRecords is the most records one GetRecords returns, and
	// Kinesis's maximum.
	DefaultMaxRecords = 10000
)

// Config configures a Stream. Zero values mean the defaults.
type Config struct {
	// StreamName names the stream. One of StreamName and StreamARN is
	// required; StreamARN wins when both are set.
	StreamName string
	// StreamARN names the stream by ARN (needed for a stream of another
	// account).
	StreamARN string

	// Region is the AWS region. Empty means the default chain's
	// (AWS_REGION, the shared config), or else the region in StreamARN.
	Region string
	// Endpoint overrides the service endpoint, e.g. an emulator's
	// "http://127.0.0.1:4567". It must be an http or https URL.
	Endpoint string
	// AccessKeyID and SecretAccessKey are static credentials (with
	// SessionToken for temporary ones). Empty means the SDK's default
	// chain. The secret is never logged or printed; put it in a drover
	// config only through ${env:...} or ${file:...}.
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string

	// PollInterval is the shortest time between two GetRecords calls of
	// one reader. 0 means DefaultPollInterval (Kinesis's limit of 5 calls
	// per second per shard); shorter intervals get throttled on AWS.
	PollInterval time.Duration
	// ThrottleBackoff is the first pause after a
	// ProvisionedThroughputExceededException. 0 means
	// DefaultThrottleBackoff; at most MaxThrottleBackoff.
	ThrottleBackoff time.Duration
	// MaxRecords caps the records of one GetRecords. 0 means
	// DefaultMaxRecords; at most 10000.
	MaxRecords int

	// Logger receives the adapter's few logs (stream opened, iterator
	// re-acquired). nil means discard.
	Logger *slog.Logger
}

// Validate reports every field that cannot be used, by name.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("kinesis: %s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.StreamName == "" && c.StreamARN == "" {
		bad("StreamName", "required (or StreamARN)")
	}
	if c.StreamARN != "" && regionFromARN(c.StreamARN) == "" {
		bad("StreamARN", "%q is not a Kinesis stream ARN (arn:PARTITION:kinesis:REGION:ACCOUNT:stream/NAME)", c.StreamARN)
	}
	if c.Endpoint != "" {
		if u, err := url.Parse(c.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("Endpoint", "%q is not an http or https URL with a host", c.Endpoint)
		}
	}
	if (c.AccessKeyID == "") != (c.SecretAccessKey == "") {
		if c.AccessKeyID == "" {
			bad("AccessKeyID", "required with SecretAccessKey")
		} else {
			bad("SecretAccessKey", "required with AccessKeyID")
		}
	}
	if c.SessionToken != "" && c.AccessKeyID == "" {
		bad("SessionToken", "needs AccessKeyID and SecretAccessKey")
	}
	if c.PollInterval < 0 {
		bad("PollInterval", "%v is negative", c.PollInterval)
	}
	if c.ThrottleBackoff < 0 || c.ThrottleBackoff > MaxThrottleBackoff {
		bad("ThrottleBackoff", "%v is outside 0..%v", c.ThrottleBackoff, MaxThrottleBackoff)
	}
	if c.MaxRecords < 0 || c.MaxRecords > DefaultMaxRecords {
		bad("MaxRecords", "%d is outside 0..10000", c.MaxRecords)
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.ThrottleBackoff == 0 {
		c.ThrottleBackoff = DefaultThrottleBackoff
	}
	if c.MaxRecords == 0 {
		c.MaxRecords = DefaultMaxRecords
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// String prints the config with the secret and the session token
// redacted, for %v and %+v.
func (c Config) String() string {
	r := c.redacted()
	return fmt.Sprintf("{StreamName:%s StreamARN:%s Region:%s Endpoint:%s AccessKeyID:%s SecretAccessKey:%s SessionToken:%s PollInterval:%v ThrottleBackoff:%v MaxRecords:%d}",
		r.StreamName, r.StreamARN, r.Region, r.Endpoint, r.AccessKeyID, r.SecretAccessKey, r.SessionToken, r.PollInterval, r.ThrottleBackoff, r.MaxRecords)
}

// GoString is String, for %#v.
func (c Config) GoString() string { return "kinesis.Config" + c.String() }

// LogValue logs the config with the secret redacted.
func (c Config) LogValue() slog.Value {
	r := c.redacted()
	return slog.GroupValue(
		slog.String("stream_name", r.StreamName),
		slog.String("stream_arn", r.StreamARN),
		slog.String("region", r.Region),
		slog.String("endpoint", r.Endpoint),
		slog.String("access_key_id", r.AccessKeyID),
		slog.String("secret_access_key", r.SecretAccessKey),
		slog.Duration("poll_interval", r.PollInterval),
		slog.Duration("throttle_backoff", r.ThrottleBackoff),
		slog.Int("max_records", r.MaxRecords),
	)
}

func (c Config) redacted() Config {
	if c.SecretAccessKey != "" {
		c.SecretAccessKey = "REDACTED"
	}
	if c.SessionToken != "" {
		c.SessionToken = "REDACTED"
	}
	c.Logger = nil
	return c
}

// regionFromARN returns the region of a Kinesis stream ARN
// (arn:PARTITION:kinesis:REGION:ACCOUNT:stream/NAME), or "".
func regionFromARN(arn string) string {
	p := strings.SplitN(arn, ":", 6)
	if len(p) != 6 || p[0] != "arn" || p[2] != "kinesis" || p[3] == "" || !strings.HasPrefix(p[5], "stream/") || p[5] == "stream/" {
		return ""
	}
	return p[3]
}
