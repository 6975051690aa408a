package awstest

import (
	"fmt"
	"net/url"

	"go.uber.org/goleak"

	"github.com/drover-dev/drover/internal/tcpproxy"
)

// Proxy is a TCP proxy on 127.0.0.1 in front of an emulator (a
// tcpproxy.Proxy that knows its URL). A test points the adapter under test
// at the proxy and then cuts its connections (Cut), or stops it (Stop: the
// port refuses connections, as a server that is down does) and starts it
// again on the same port (Start), while the emulator behind it keeps its
// data. Close stops it for good and waits for its goroutines. Safe for
// concurrent use.
type Proxy struct {
	*tcpproxy.Proxy
}

// NewProxy starts a proxy to the server at endpoint (an http URL).
func NewProxy(endpoint string) (*Proxy, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("awstest: proxy target %q is not a URL", endpoint)
	}
	p, err := tcpproxy.New(u.Host)
	if err != nil {
		return nil, err
	}
	return &Proxy{p}, nil
}

// Endpoint is the proxy's URL.
func (p *Proxy) Endpoint() string { return "http://" + p.Addr() }

// IgnoreGoroutines matches the proxy's goroutines, for goleak.
func IgnoreGoroutines() []goleak.Option { return tcpproxy.IgnoreGoroutines() }
