package debug

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/actors/placement"
	"github.com/drover-dev/drover/internal/clock"
)

// Defaults of Config's zero values.
const (
	DefaultAddr         = "127.0.0.1:7070"
	DefaultFetchTimeout = 2 * time.Second
	// DefaultReadTimeout bounds reading a whole request, headers and body;
	// the headers alone get at most DefaultReadHeaderTimeout of it.
	DefaultReadTimeout       = 10 * time.Second
	DefaultReadHeaderTimeout = 5 * time.Second
	// DefaultIdleTimeout closes a kept-alive connection idle that long:
	// well above the page's one-second poll, so the page keeps its
	// connection.
	DefaultIdleTimeout = 30 * time.Second
	// DefaultWriteMargin is added to FetchTimeout for the default
	// WriteTimeout: a cluster answer may wait FetchTimeout for the other
	// members before it writes.
	DefaultWriteMargin = 10 * time.Second
	// DefaultControlTimeout is how long a control (POST /debug/control/…)
	// may take before its answer is written: a reload hands the units of
	// the sources it removes over, for up to two minutes. The control
	// route extends its write deadline past WriteTimeout to it.
	DefaultControlTimeout = 3 * time.Minute
)

// Node is what the endpoint shows. Implementations are safe for concurrent
// use and must not block on the network: every method is called from HTTP
// handlers, Tree and Members once per request.
type Node interface {
	// Tree is a snapshot of this node's actor tree; the caller owns it.
	Tree() actors.Tree
	// Members are the live members of this node's view (this node
	// included), each with the debug address it gossips.
	Members() []placement.Member
	// Ready is nil when the store is reachable and membership has joined;
	// otherwise it says what is missing.
	Ready() error
}

// CounterReader is implemented by a Node that can read its units'
// counters without a snapshot of its tree: the background sample of the
// history reads this node's units so (a snapshot of 10,000 units copied
// 2.5 MB every SampleEvery).
type CounterReader interface {
	// Name is the node's name, the Node of its Tree.
	Name() string
	// Counters appends to buf[:0], reusing its slices, the sources and
	// units that Tree would show now, in its order, with their applied
	// and lag_seconds; the caller owns buf.
	Counters(buf []actors.SourceCounters) []actors.SourceCounters
}

// Config configures a Server. Zero values mean the defaults.
type Config struct {
	// Addr is the listen address host:port (node.debug_addr). Default
	// 127.0.0.1:7070; port 0 picks a free port (see Server.Addr).
	Addr string
	// Token is the bearer token (node.debug_token). Required when Addr's
	// host is not a loopback address; when set, every route but /healthz
	// requires "Authorization: Bearer <Token>".
	Token string
	// AdminToken, when set, is the only token the controls (POST
	// /debug/control/{action}) accept (node.admin_token); empty: they take
	// Token.
	AdminToken string
	// Controller carries out the controls; nil: they answer 501.
	Controller Controller
	// Events is the node's event log served on GET /debug/events; nil
	// answers no events.
	Events EventLog
	// Node is the node shown. Required.
	Node Node
	// Registry is served on /metrics. Nil serves an empty registry.
	Registry *prometheus.Registry
	// Client asks the other members for their trees. Nil means a client of
	// the Server's own (closed by Shutdown) with FetchTimeout as its
	// timeout.
	Client *http.Client
	// FetchTimeout bounds each request to another member, whatever the
	// Client's own timeout. Default 2 s.
	FetchTimeout time.Duration

	// MembersAuthenticated says that every member Node.Members lists
	// joined through authenticated gossip: gossip is encrypted with
	// cluster.secret_key, so a member holds the key. Only then does the
	// cluster scope send Token to the other members. Without it, and with
	// a Token, the other members are not asked (the token would go to
	// whoever joined plain gossip and advertised a debug address): they are
	// listed with an error saying so. Without a Token they are asked either
	// way, as nothing secret is sent.
	MembersAuthenticated bool

	// TLSCert and TLSKey are paths of PEM files (node.debug_tls.cert and
	// .key), both or neither: with them the endpoint serves HTTPS (HTTP/1.1,
	// TLS 1.2 or later) and nothing else. They are read by New.
	TLSCert, TLSKey string
	// TLSCA is a path of a PEM file of the certificates that sign the
	// other members' debug endpoints (node.debug_tls.ca); empty: the
	// system's roots. It is used by the Server's own client (Client nil).
	TLSCA string

	// ReadTimeout, ReadHeaderTimeout, WriteTimeout and IdleTimeout are
	// net/http's. Defaults: DefaultReadTimeout, DefaultReadHeaderTimeout
	// (at most ReadTimeout), FetchTimeout + DefaultWriteMargin,
	// DefaultIdleTimeout.
	ReadTimeout, ReadHeaderTimeout, WriteTimeout, IdleTimeout time.Duration
	// ControlTimeout is the write deadline of a control's answer, from
	// when its request was read (default DefaultControlTimeout; never
	// below WriteTimeout).
	ControlTimeout time.Duration
	// Logger receives the server's errors; nil discards them.
	Logger *slog.Logger

	// Clock tells the time of the memory of gone members and of the
	// history, and schedules the samples. Nil: the wall clock.
	Clock clock.Clock
	// SampleEvery is the cadence of the background cluster samples that
	// feed GET /debug/history and the memory of gone members, from Start
	// to Shutdown; each is one cluster fan-out (shared with any page
	// polling then). Default DefaultSampleEvery; negative: no background
	// samples (the page's polls still feed the memory of gone members).
	SampleEvery time.Duration
	// GoneFor is how long a member that left the view stays in the
	// cluster tree's "gone" list (default DefaultGoneFor); MaxGone bounds
	// that list (default DefaultMaxGone).
	GoneFor time.Duration
	MaxGone int
}

// withDefaults returns c with its zero values filled in, or the first
// thing wrong with it.
func (c Config) withDefaults() (Config, error) {
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	host, port, err := net.SplitHostPort(c.Addr)
	if err != nil {
		return c, fmt.Errorf("debug address %q: %w", c.Addr, err)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return c, fmt.Errorf("debug address %q: port %q is not a number from 0 to 65535", c.Addr, port)
	}
	if !isLoopback(host) && c.Token == "" {
		return c, fmt.Errorf("%w (debug address %s)", ErrTokenRequired, c.Addr)
	}
	if c.Node == nil {
		return c, fmt.Errorf("debug: Config.Node is required")
	}
	if c.FetchTimeout < 0 {
		return c, fmt.Errorf("debug: FetchTimeout %v is negative", c.FetchTimeout)
	}
	if c.FetchTimeout == 0 {
		c.FetchTimeout = DefaultFetchTimeout
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"ReadTimeout", c.ReadTimeout}, {"ReadHeaderTimeout", c.ReadHeaderTimeout}, {"WriteTimeout", c.WriteTimeout}, {"IdleTimeout", c.IdleTimeout}, {"ControlTimeout", c.ControlTimeout}} {
		if d.v < 0 {
			return c, fmt.Errorf("debug: %s %v is negative", d.name, d.v)
		}
	}
	if c.ReadTimeout == 0 {
		c.ReadTimeout = DefaultReadTimeout
	}
	if c.ReadHeaderTimeout == 0 {
		c.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = c.FetchTimeout + DefaultWriteMargin
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.ControlTimeout == 0 {
		c.ControlTimeout = DefaultControlTimeout
	}
	c.ControlTimeout = max(c.ControlTimeout, c.WriteTimeout)
	if c.ReadHeaderTimeout > c.ReadTimeout {
		c.ReadHeaderTimeout = c.ReadTimeout
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return c, errors.New("node.debug_tls: cert and key go together")
	}
	if c.Registry == nil {
		c.Registry = prometheus.NewRegistry()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.SampleEvery == 0 {
		c.SampleEvery = DefaultSampleEvery
	}
	if c.GoneFor < 0 || c.MaxGone < 0 {
		return c, fmt.Errorf("debug: GoneFor %v and MaxGone %d must not be negative", c.GoneFor, c.MaxGone)
	}
	if c.GoneFor == 0 {
		c.GoneFor = DefaultGoneFor
	}
	if c.MaxGone == 0 {
		c.MaxGone = DefaultMaxGone
	}
	return c, nil
}

// isLoopback reports whether a listen host only accepts connections from
// this machine. An empty host listens on every interface: not loopback.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
