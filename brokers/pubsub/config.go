package pubsub

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Defaults of the zero values of Config.
const (
	DefaultMaxMessages    = 1000
	DefaultKeyAttribute   = "key"
	DefaultPollInterval   = 100 * time.Millisecond
	DefaultRequestTimeout = 30 * time.Second
	// MaxPullMessages is the most messages one Pull returns.
	MaxPullMessages = 1000
	// MaxAckDeadline is the longest ack deadline Pub/Sub accepts.
	MaxAckDeadline = 600 * time.Second
)

// Config configures a Queue: one Pub/Sub subscription read with unary Pull.
//
// CredentialsFile is a path; the file's contents are never logged or put
// into errors.
type Config struct {
	// Project is the Google Cloud project of the subscription. Required
	// unless Subscription is a full path.
	Project string
	// Subscription is the subscription's ID, or its full path
	// "projects/<project>/subscriptions/<id>". Required; it must exist.
	Subscription string
	// Endpoint is the service's host:port. Empty means Google's endpoint,
	// or the emulator PUBSUB_EMULATOR_HOST names when it is set (then
	// without TLS or authentication, as the client library does).
	Endpoint string
	// Insecure talks to Endpoint without TLS and without authentication:
	// for an emulator.
	Insecure bool
	// CredentialsFile is a Google credentials JSON file (service account,
	// authorized user, external account, ...). Empty means Application
	// Default Credentials.
	CredentialsFile string
	// MaxMessages caps the messages one Pull asks for (and so one
	// Receive returns). 0 means DefaultMaxMessages; at most
	// MaxPullMessages.
	MaxMessages int
	// KeyAttribute names the attribute that is a message's key when it has
	// no ordering key. Empty means DefaultKeyAttribute.
	KeyAttribute string
	// PollInterval is the longest pause between two Pulls while a Receive
	// waits for messages (see the package doc). 0 means
	// DefaultPollInterval.
	PollInterval time.Duration
	// RequestTimeout bounds one RPC when the caller's context has no
	// earlier deadline. 0 means DefaultRequestTimeout.
	RequestTimeout time.Duration
	// Logger receives what the adapter has to say (nil discards).
	Logger *slog.Logger
}

var (
	// projectRE is lenient: Google's project IDs, domain-scoped ones
	// ("example.com:proj") and emulator projects.
	projectRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,99}$`)
	// subscriptionRE is Pub/Sub's rule for subscription IDs.
	subscriptionRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9\-_.~+%]{2,254}$`)
)

// Validate reports the first field that cannot be used, by name.
func (c Config) Validate() error {
	project, sub, full := splitPath(c.Subscription)
	switch {
	case c.Subscription == "":
		return errors.New("pubsub config: Subscription: required")
	case strings.Contains(c.Subscription, "/") && !full:
		return fmt.Errorf("pubsub config: Subscription %q: want an ID or projects/<project>/subscriptions/<id>", c.Subscription)
	case !subscriptionRE.MatchString(sub) || strings.HasPrefix(strings.ToLower(sub), "goog"):
		return fmt.Errorf("pubsub config: Subscription %q: an ID is 3-255 letters, digits or - _ . ~ + %%, starts with a letter and not with goog", sub)
	case full && c.Project != "" && c.Project != project:
		return fmt.Errorf("pubsub config: Project %q: the Subscription path names project %q", c.Project, project)
	case !full && c.Project == "":
		return errors.New("pubsub config: Project: required (or give Subscription as projects/<project>/subscriptions/<id>)")
	}
	if p := c.project(); !projectRE.MatchString(p) {
		return fmt.Errorf("pubsub config: Project %q: want a project ID", p)
	}
	if c.Endpoint != "" {
		if err := validateHostPort(c.Endpoint); err != nil {
			return fmt.Errorf("pubsub config: Endpoint %q: %w", c.Endpoint, err)
		}
	}
	if c.Insecure && c.Endpoint == "" {
		return errors.New("pubsub config: Insecure: set only with Endpoint (an emulator's host:port)")
	}
	if c.Insecure && c.CredentialsFile != "" {
		return errors.New("pubsub config: CredentialsFile: not used with Insecure (no authentication)")
	}
	if c.MaxMessages < 0 || c.MaxMessages > MaxPullMessages {
		return fmt.Errorf("pubsub config: MaxMessages: %d is not within 0-%d", c.MaxMessages, MaxPullMessages)
	}
	if c.PollInterval < 0 {
		return fmt.Errorf("pubsub config: PollInterval: %v is negative", c.PollInterval)
	}
	if c.RequestTimeout < 0 {
		return fmt.Errorf("pubsub config: RequestTimeout: %v is negative", c.RequestTimeout)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.MaxMessages == 0 {
		c.MaxMessages = DefaultMaxMessages
	}
	if c.KeyAttribute == "" {
		c.KeyAttribute = DefaultKeyAttribute
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// project is the subscription's project.
func (c Config) project() string {
	if p, _, full := splitPath(c.Subscription); full {
		return p
	}
	return c.Project
}

// path is the subscription's full path.
func (c Config) path() string {
	_, sub, _ := splitPath(c.Subscription)
	return "projects/" + c.project() + "/subscriptions/" + sub
}

// splitPath splits "projects/P/subscriptions/S"; for anything else it
// returns s as the ID and full false.
func splitPath(s string) (project, sub string, full bool) {
	parts := strings.Split(s, "/")
	if len(parts) == 4 && parts[0] == "projects" && parts[2] == "subscriptions" && parts[1] != "" && parts[3] != "" {
		return parts[1], parts[3], true
	}
	return "", s, false
}

func validateHostPort(s string) error {
	if strings.Contains(s, "://") {
		return errors.New("want host:port without a scheme")
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return errors.New("want host:port")
	}
	if host == "" || strings.ContainsAny(host, "/@?#") {
		return errors.New("want host:port with a host name or address")
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("port %q: want 1-65535", port)
	}
	return nil
}

// LogValue shows the config; the credentials file is a path, its contents
// are never read into it.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("subscription", c.path()),
		slog.String("endpoint", c.Endpoint),
		slog.Bool("insecure", c.Insecure),
		slog.String("credentials_file", c.CredentialsFile),
		slog.Int("max_messages", c.MaxMessages),
	)
}
