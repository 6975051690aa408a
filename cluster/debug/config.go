package debug

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/cluster"
)

// Defaults of Config's zero values.
const (
	DefaultAddr         = "127.0.0.1:7070"
	DefaultFetchTimeout = 2 * time.Second
)

// Node is what the endpoint shows. Implementations are safe for concurrent
// use and must not block on the network: every method is called from HTTP
// handlers, Tree and Members once per request.
type Node interface {
	// Tree is a snapshot of this node's actor tree; the caller owns it.
	Tree() actors.Tree
	// Members are the live members of this node's view (this node
	// included), each with the debug address it gossips.
	Members() []cluster.Member
	// Ready is nil when the store is reachable and membership has joined;
	// otherwise it says what is missing.
	Ready() error
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
	// Logger receives the server's errors; nil discards them.
	Logger *slog.Logger
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
	if c.Registry == nil {
		c.Registry = prometheus.NewRegistry()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
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
