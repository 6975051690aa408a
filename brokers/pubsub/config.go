package pubsub

import (
	"log/slog"
	"net"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/drover-dev/drover/brokers"
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
// It is also the pubsub section of a node's config file (architecture §9):
// the yaml tags are the file's names, cluster/config reads the section
// into it and reports Validate's problems under sources[i].pubsub (adding
// the file's own rules: a project, and a subscription ID rather than a
// path). Fields tagged yaml:"-" are the library's alone.
//
// CredentialsFile is a path; the file's contents are never logged or put
// into errors.
type Config struct {
	// Project is the Google Cloud project of the subscription. Required
	// unless Subscription is a full path.
	Project string `yaml:"project" json:"project"`
	// Subscription is the subscription's ID, or its full path
	// "projects/<project>/subscriptions/<id>". Required; it must exist.
	Subscription string `yaml:"subscription" json:"subscription"`
	// Endpoint is the service's host:port. Empty means Google's endpoint,
	// or the emulator PUBSUB_EMULATOR_HOST names when it is set (then
	// without TLS or authentication, as the client library does).
	Endpoint string `yaml:"endpoint" json:"endpoint,omitempty"`
	// Insecure talks to Endpoint without TLS and without authentication:
	// for an emulator. (A node sets it for an endpoint without
	// credentials_file.)
	Insecure bool `yaml:"-" json:"-"`
	// CredentialsFile is a Google credentials JSON file (service account,
	// authorized user, external account, ...). Empty means Application
	// Default Credentials.
	CredentialsFile string `yaml:"credentials_file" json:"credentials_file,omitempty"`
	// MaxMessages caps the messages one Pull asks for (and so one
	// Receive returns). 0 means DefaultMaxMessages; at most
	// MaxPullMessages.
	MaxMessages int `yaml:"max_outstanding" json:"max_outstanding,omitempty"`
	// KeyAttribute names the attribute that is a message's key when it has
	// no ordering key. Empty means DefaultKeyAttribute.
	KeyAttribute string `yaml:"-" json:"-"`
	// PollInterval is the longest pause between two Pulls while a Receive
	// waits for messages (see the package doc). 0 means
	// DefaultPollInterval.
	PollInterval time.Duration `yaml:"-" json:"-"`
	// RequestTimeout bounds one RPC when the caller's context has no
	// earlier deadline. 0 means DefaultRequestTimeout.
	RequestTimeout time.Duration `yaml:"-" json:"-"`
	// Logger receives what the adapter has to say (nil discards).
	Logger *slog.Logger `yaml:"-" json:"-"`
}

var (
	// projectRE is lenient: Google's project IDs, domain-scoped ones
	// ("example.com:proj") and emulator projects.
	projectRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,99}$`)
	// subscriptionRE is Pub/Sub's rule for subscription IDs.
	subscriptionRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9\-_.~+%]{2,254}$`)
)

// Validate reports every field that cannot be used, at its path in the
// config file's names (the library-only fields by their names in
// snake_case), as brokers.FieldErrors wrapped in "pubsub: ".
func (c Config) Validate() error {
	var e brokers.FieldErrors
	project, sub, full := splitPath(c.Subscription)
	switch p := c.project(); {
	case full && c.Project != "" && c.Project != project:
		e.Add("project", "%q: the subscription path names project %q", c.Project, project)
	case !full && c.Project == "":
		e.Add("project", "required (or give subscription as projects/<project>/subscriptions/<id>)")
	case !projectRE.MatchString(p):
		e.Add("project", "%q must be a project ID", p)
	}
	switch {
	case c.Subscription == "":
		e.Add("subscription", "required")
	case strings.Contains(c.Subscription, "/") && !full:
		e.Add("subscription", "%q must be an ID or projects/<project>/subscriptions/<id>", c.Subscription)
	case !subscriptionRE.MatchString(sub) || strings.HasPrefix(strings.ToLower(sub), "goog"):
		e.Add("subscription", "%q must be an ID of 3-255 letters, digits or - _ . ~ + %%, starting with a letter and not with goog", sub)
	}
	if c.Endpoint != "" {
		checkHostPort(&e, "endpoint", c.Endpoint)
	}
	if c.Insecure && c.Endpoint == "" {
		e.Add("insecure", "set only with endpoint (an emulator's host:port)")
	}
	if c.Insecure && c.CredentialsFile != "" {
		e.Add("credentials_file", "not used with insecure (no authentication)")
	}
	switch {
	case c.MaxMessages < 0:
		e.Add("max_outstanding", "must not be negative, not %d", c.MaxMessages)
	case c.MaxMessages > MaxPullMessages:
		e.Add("max_outstanding", "must be at most %d, not %d", MaxPullMessages, c.MaxMessages)
	}
	if c.PollInterval < 0 {
		e.Add("poll_interval", "must not be negative, not %v", c.PollInterval)
	}
	if c.RequestTimeout < 0 {
		e.Add("request_timeout", "must not be negative, not %v", c.RequestTimeout)
	}
	return e.Err("pubsub")
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

// checkHostPort accepts host:port with a host and a port from 1 to 65535.
func checkHostPort(e *brokers.FieldErrors, path, s string) {
	if strings.Contains(s, "://") {
		e.Add(path, "%q must be host:port, without a URL scheme", s)
		return
	}
	h, p, err := net.SplitHostPort(s)
	if err != nil {
		e.Add(path, "%q must be host:port", s)
		return
	}
	if port, err := strconv.Atoi(p); err != nil || port < 1 || port > 65535 {
		e.Add(path, "%q: port %q must be a number from 1 to 65535", s, p)
		return
	}
	switch {
	case h == "":
		e.Add(path, "%q: host is missing", s)
	case strings.ContainsAny(h, " /@?#"):
		e.Add(path, "%q: %q is not a host name or IP address", s, h)
	}
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
