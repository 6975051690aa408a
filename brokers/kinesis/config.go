package kinesis

import (
	"cmp"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/internal/awsutil"
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
//
// It is also the kinesis section of a node's config file (architecture
// §9): the yaml tags are the file's names, cluster/config reads the
// section into it and reports Validate's problems under
// sources[i].kinesis.
type Config struct {
	// StreamName names the stream. One of StreamName and StreamARN is
	// required; StreamARN wins when both are set.
	StreamName string `yaml:"stream" json:"stream"`
	// StreamARN names the stream by ARN (needed for a stream of another
	// account).
	StreamARN string `yaml:"-" json:"stream_arn,omitempty"`

	// Region is the AWS region. Empty means the default chain's
	// (AWS_REGION, the shared config), or else the region in StreamARN.
	// (A config file must name it.)
	Region string `yaml:"region" json:"region"`
	// Endpoint overrides the service endpoint, e.g. an emulator's
	// "http://127.0.0.1:4567". It must be an http or https URL.
	Endpoint string `yaml:"endpoint" json:"endpoint,omitempty"`
	// AccessKeyID and SecretAccessKey are static credentials (with
	// SessionToken for temporary ones). Empty means the SDK's default
	// chain. The secrets never print; put them in a drover config only
	// through ${env:...} or ${file:...}.
	AccessKeyID     string         `yaml:"access_key_id" json:"access_key_id,omitempty"`
	SecretAccessKey brokers.Secret `yaml:"secret_access_key" json:"secret_access_key,omitempty"`
	SessionToken    brokers.Secret `yaml:"-" json:"session_token,omitempty"`

	// PollInterval is the shortest time between two GetRecords calls of
	// one reader. 0 means DefaultPollInterval (Kinesis's limit of 5 calls
	// per second per shard); shorter intervals get throttled on AWS.
	PollInterval time.Duration `yaml:"-" json:"poll_interval,omitempty"`
	// ThrottleBackoff is the first pause after a
	// ProvisionedThroughputExceededException. 0 means
	// DefaultThrottleBackoff; at most MaxThrottleBackoff.
	ThrottleBackoff time.Duration `yaml:"-" json:"throttle_backoff,omitempty"`
	// MaxRecords caps the records of one GetRecords. 0 means
	// DefaultMaxRecords; at most 10000.
	MaxRecords int `yaml:"-" json:"max_records,omitempty"`

	// Logger receives the adapter's few logs (stream opened, iterator
	// re-acquired). nil means discard.
	Logger *slog.Logger `yaml:"-" json:"-"`
}

// Format prints the config whatever the verb with its secrets masked: fmt
// would print a *Config inside another value with %s or %q through a path
// that ignores Secret's methods.
func (c Config) Format(f fmt.State, verb rune) {
	type view Config
	fmt.Fprintf(f, fmt.FormatString(f, verb), view(c))
}

// Validate reports every field that cannot be used, at its path in the
// config file's names, as brokers.FieldErrors wrapped in "kinesis: ".
func (c Config) Validate() error {
	var e brokers.FieldErrors
	if strings.TrimSpace(c.StreamName) == "" && c.StreamARN == "" {
		e.Add("stream", "required")
	}
	if c.StreamARN != "" && regionFromARN(c.StreamARN) == "" {
		e.Add("stream_arn", "%q is not a Kinesis stream ARN (arn:PARTITION:kinesis:REGION:ACCOUNT:stream/NAME)", c.StreamARN)
	}
	if c.Endpoint != "" {
		awsutil.CheckURL(&e, "endpoint", c.Endpoint)
	}
	awsutil.CheckCredentials(&e, c.AccessKeyID, c.SecretAccessKey, c.SessionToken)
	if c.PollInterval < 0 {
		e.Add("poll_interval", "must not be negative, not %v", c.PollInterval)
	}
	if c.ThrottleBackoff < 0 || c.ThrottleBackoff > MaxThrottleBackoff {
		e.Add("throttle_backoff", "must be between 0s and %v, not %v", MaxThrottleBackoff, c.ThrottleBackoff)
	}
	if c.MaxRecords < 0 || c.MaxRecords > DefaultMaxRecords {
		e.Add("max_records", "must be between 0 and %d, not %d", DefaultMaxRecords, c.MaxRecords)
	}
	return e.Err("kinesis")
}

func (c Config) withDefaults() Config {
	c.PollInterval = cmp.Or(c.PollInterval, DefaultPollInterval)
	c.ThrottleBackoff = cmp.Or(c.ThrottleBackoff, DefaultThrottleBackoff)
	c.MaxRecords = cmp.Or(c.MaxRecords, DefaultMaxRecords)
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
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
