package sqs

import (
	"cmp"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/internal/awsutil"
)

// Defaults and limits of Config.
const (
	// DefaultWaitTime is the longest single long poll, and SQS's maximum.
	DefaultWaitTime = 20 * time.Second
	// DefaultMaxMessages is the most messages one ReceiveMessage returns,
	// and SQS's maximum.
	DefaultMaxMessages = 10
	// DefaultKeyAttribute is the message attribute read as the key.
	DefaultKeyAttribute = "key"
	// MaxVisibilityTimeout is SQS's longest visibility timeout.
	MaxVisibilityTimeout = 12 * time.Hour
	// DefaultVisibilityTimeout is the visibility timeout every receive asks
	// for when Config.VisibilityTimeout is 0: SQS's own default for a queue.
	DefaultVisibilityTimeout = 30 * time.Second
)

// Config configures a Queue. Zero values mean the defaults.
//
// It is also the sqs section of a node's config file (architecture §9):
// the yaml tags are the file's names, cluster/config reads the section
// into it and reports Validate's problems under sources[i].sqs.
type Config struct {
	// Region is the AWS region. Empty means the default chain's
	// (AWS_REGION, the shared config), or else the region in QueueURL's
	// host. (A config file must name it.)
	Region string `yaml:"region" json:"region"`
	// QueueURL is the queue's URL. One of QueueURL and QueueName is
	// required; QueueURL wins when both are set.
	QueueURL string `yaml:"queue_url" json:"queue_url"`
	// QueueName is resolved to a URL with GetQueueUrl when QueueURL is
	// empty. A FIFO queue's name ends in ".fifo".
	QueueName string `yaml:"-" json:"queue_name,omitempty"`
	// QueueOwner is the AWS account id that owns QueueName, when it is
	// not the caller's.
	QueueOwner string `yaml:"-" json:"queue_owner,omitempty"`

	// Endpoint overrides the service endpoint, e.g. an emulator's
	// "http://127.0.0.1:4566". It must be an http or https URL.
	Endpoint string `yaml:"endpoint" json:"endpoint,omitempty"`

	// WaitTime is the longest single long poll (ReceiveMessage
	// WaitTimeSeconds); a Receive with a longer wait polls again. 0 means
	// DefaultWaitTime; at most 20 s; whole seconds are used.
	WaitTime time.Duration `yaml:"wait" json:"wait"`
	// VisibilityTimeout is how long the messages a Receive returns stay
	// invisible to other receivers (rounded up to whole seconds, at most
	// 12 h). 0 means DefaultVisibilityTimeout. Every ReceiveMessage sends
	// it, so the queue's own VisibilityTimeout attribute never applies: a
	// caller that extends in-flight messages on this schedule is right
	// whatever the queue was created with.
	VisibilityTimeout time.Duration `yaml:"visibility_timeout" json:"visibility_timeout"`

	// AccessKeyID and SecretAccessKey are static credentials (with
	// SessionToken for temporary ones). Empty means the SDK's default
	// chain (environment, shared files, web identity, container or
	// instance role). The secrets never print; put them in a drover
	// config only through ${env:...} or ${file:...}.
	AccessKeyID     string         `yaml:"access_key_id" json:"access_key_id,omitempty"`
	SecretAccessKey brokers.Secret `yaml:"secret_access_key" json:"secret_access_key,omitempty"`
	SessionToken    brokers.Secret `yaml:"-" json:"session_token,omitempty"`

	// MaxMessages caps the messages of one Receive. 0 means
	// DefaultMaxMessages; at most 10.
	MaxMessages int `yaml:"-" json:"max_messages,omitempty"`
	// KeyAttribute is the message attribute whose value becomes
	// Message.Key. 0 means DefaultKeyAttribute. A message without it has
	// its FIFO MessageGroupId as key, or no key on a standard queue.
	KeyAttribute string `yaml:"-" json:"key_attribute,omitempty"`

	// Logger receives the adapter's few logs (queue opened). nil means
	// discard.
	Logger *slog.Logger `yaml:"-" json:"-"`
}

// FIFO reports a FIFO queue by its URL or name (ending in ".fifo").
func (c Config) FIFO() bool {
	return strings.HasSuffix(c.QueueURL, ".fifo") || (c.QueueURL == "" && strings.HasSuffix(c.QueueName, ".fifo"))
}

// Format prints the config whatever the verb with its secrets masked: fmt
// would print a *Config inside another value with %s or %q through a path
// that ignores Secret's methods.
func (c Config) Format(f fmt.State, verb rune) {
	type view Config
	fmt.Fprintf(f, fmt.FormatString(f, verb), view(c))
}

// Validate reports every field that cannot be used, at its path in the
// config file's names, as brokers.FieldErrors wrapped in "sqs: ".
func (c Config) Validate() error {
	var e brokers.FieldErrors
	switch {
	case strings.TrimSpace(c.QueueURL) == "" && c.QueueName == "":
		e.Add("queue_url", "required")
	case c.QueueURL != "":
		awsutil.CheckURL(&e, "queue_url", c.QueueURL)
	}
	if c.Endpoint != "" {
		awsutil.CheckURL(&e, "endpoint", c.Endpoint)
	}
	if c.WaitTime < 0 || c.WaitTime > DefaultWaitTime {
		e.Add("wait", "must be between 0s and 20s, not %v", c.WaitTime)
	}
	if c.VisibilityTimeout < 0 || c.VisibilityTimeout > MaxVisibilityTimeout {
		e.Add("visibility_timeout", "must be between 0s and %v, not %v", MaxVisibilityTimeout, c.VisibilityTimeout)
	}
	awsutil.CheckCredentials(&e, c.AccessKeyID, c.SecretAccessKey, c.SessionToken)
	if c.MaxMessages < 0 || c.MaxMessages > DefaultMaxMessages {
		e.Add("max_messages", "must be between 0 and %d, not %d", DefaultMaxMessages, c.MaxMessages)
	}
	if strings.TrimSpace(c.KeyAttribute) != c.KeyAttribute {
		e.Add("key_attribute", "%q has surrounding spaces", c.KeyAttribute)
	}
	return e.Err("sqs")
}

func (c Config) withDefaults() Config {
	c.WaitTime = cmp.Or(c.WaitTime, DefaultWaitTime)
	c.MaxMessages = cmp.Or(c.MaxMessages, DefaultMaxMessages)
	c.VisibilityTimeout = cmp.Or(c.VisibilityTimeout, DefaultVisibilityTimeout)
	c.KeyAttribute = cmp.Or(c.KeyAttribute, DefaultKeyAttribute)
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
	return c
}

// regionFromURL returns the region in an SQS URL's host
// (sqs.REGION.amazonaws.com, REGION.queue.amazonaws.com), or "".
func regionFromURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return ""
	}
	parts := strings.Split(u.Hostname(), ".")
	for i, p := range parts {
		if p == "sqs" && i+1 < len(parts) && strings.Contains(parts[i+1], "-") {
			return parts[i+1]
		}
		if p == "queue" && i > 0 && strings.Contains(parts[i-1], "-") {
			return parts[i-1]
		}
	}
	return ""
}
