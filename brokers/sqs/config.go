package sqs

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
type Config struct {
	// QueueURL is the queue's URL. One of QueueURL and QueueName is
	// required; QueueURL wins when both are set.
	QueueURL string
	// QueueName is resolved to a URL with GetQueueUrl when QueueURL is
	// empty. A FIFO queue's name ends in ".fifo".
	QueueName string
	// QueueOwner is the AWS account id that owns QueueName, when it is
	// not the caller's.
	QueueOwner string

	// Region is the AWS region. Empty means the default chain's
	// (AWS_REGION, the shared config), or else the region in QueueURL's
	// host.
	Region string
	// Endpoint overrides the service endpoint, e.g. an emulator's
	// "http://127.0.0.1:4566". It must be an http or https URL.
	Endpoint string
	// AccessKeyID and SecretAccessKey are static credentials (with
	// SessionToken for temporary ones). Empty means the SDK's default
	// chain (environment, shared files, web identity, container or
	// instance role). The secret is never logged or printed; put it in a
	// drover config only through ${env:...} or ${file:...}.
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string

	// WaitTime is the longest single long poll (ReceiveMessage
	// WaitTimeSeconds); a Receive with a longer wait polls again. 0 means
	// DefaultWaitTime; at most 20 s; whole seconds are used.
	WaitTime time.Duration
	// VisibilityTimeout is how long the messages a Receive returns stay
	// invisible to other receivers (rounded up to whole seconds, at most
	// 12 h). 0 means DefaultVisibilityTimeout. Every ReceiveMessage sends
	// it, so the queue's own VisibilityTimeout attribute never applies: a
	// caller that extends in-flight messages on this schedule is right
	// whatever the queue was created with.
	VisibilityTimeout time.Duration
	// MaxMessages caps the messages of one Receive. 0 means
	// DefaultMaxMessages; at most 10.
	MaxMessages int
	// KeyAttribute is the message attribute whose value becomes
	// Message.Key. 0 means DefaultKeyAttribute. A message without it has
	// its FIFO MessageGroupId as key, or no key on a standard queue.
	KeyAttribute string

	// Logger receives the adapter's few logs (queue opened). nil means
	// discard.
	Logger *slog.Logger
}

// Validate reports the first field that cannot be used, by name.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("sqs: %s: %s", field, fmt.Sprintf(format, args...)))
	}
	switch {
	case c.QueueURL == "" && c.QueueName == "":
		bad("QueueURL", "required (or QueueName)")
	case c.QueueURL != "":
		if err := checkURL(c.QueueURL); err != nil {
			bad("QueueURL", "%v", err)
		}
	}
	if c.Endpoint != "" {
		if err := checkURL(c.Endpoint); err != nil {
			bad("Endpoint", "%v", err)
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
	if c.WaitTime < 0 || c.WaitTime > DefaultWaitTime {
		bad("WaitTime", "%v is outside 0..20s", c.WaitTime)
	}
	if c.VisibilityTimeout < 0 || c.VisibilityTimeout > MaxVisibilityTimeout {
		bad("VisibilityTimeout", "%v is outside 0..12h", c.VisibilityTimeout)
	}
	if c.MaxMessages < 0 || c.MaxMessages > DefaultMaxMessages {
		bad("MaxMessages", "%d is outside 0..10", c.MaxMessages)
	}
	if strings.TrimSpace(c.KeyAttribute) != c.KeyAttribute {
		bad("KeyAttribute", "%q has surrounding spaces", c.KeyAttribute)
	}
	return errors.Join(errs...)
}

func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%q is not a URL", s)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%q: scheme must be http or https", s)
	}
	if u.Host == "" {
		return fmt.Errorf("%q has no host", s)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.WaitTime == 0 {
		c.WaitTime = DefaultWaitTime
	}
	if c.MaxMessages == 0 {
		c.MaxMessages = DefaultMaxMessages
	}
	if c.VisibilityTimeout == 0 {
		c.VisibilityTimeout = DefaultVisibilityTimeout
	}
	if c.KeyAttribute == "" {
		c.KeyAttribute = DefaultKeyAttribute
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
	return fmt.Sprintf("{QueueURL:%s QueueName:%s QueueOwner:%s Region:%s Endpoint:%s AccessKeyID:%s SecretAccessKey:%s SessionToken:%s WaitTime:%v VisibilityTimeout:%v MaxMessages:%d KeyAttribute:%s}",
		r.QueueURL, r.QueueName, r.QueueOwner, r.Region, r.Endpoint, r.AccessKeyID, r.SecretAccessKey, r.SessionToken, r.WaitTime, r.VisibilityTimeout, r.MaxMessages, r.KeyAttribute)
}

// GoString is String, for %#v.
func (c Config) GoString() string { return "sqs.Config" + c.String() }

// LogValue logs the config with the secret redacted.
func (c Config) LogValue() slog.Value {
	r := c.redacted()
	return slog.GroupValue(
		slog.String("queue_url", r.QueueURL),
		slog.String("queue_name", r.QueueName),
		slog.String("region", r.Region),
		slog.String("endpoint", r.Endpoint),
		slog.String("access_key_id", r.AccessKeyID),
		slog.String("secret_access_key", r.SecretAccessKey),
		slog.Duration("wait_time", r.WaitTime),
		slog.Duration("visibility_timeout", r.VisibilityTimeout),
		slog.Int("max_messages", r.MaxMessages),
		slog.String("key_attribute", r.KeyAttribute),
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
