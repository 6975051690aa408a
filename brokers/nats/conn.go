package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/internal/lifetime"
)

// conn is one NATS connection with its JetStream context, shared by a
// Queue's receivers or a Stream's readers. It tracks whether the connection
// is up so that a wait can end as soon as it drops.
type conn struct {
	nc  *natsgo.Conn
	js  jetstream.JetStream
	log *slog.Logger
	cfg ConnConfig

	// life ends in close: every call in flight on this connection then
	// ends with brokers.ErrClosed.
	life lifetime.Life

	mu   sync.Mutex
	lost chan struct{} // closed when the connection drops; replaced when it is back
}

// dial connects to the servers of cfg (with defaults applied).
func dial(ctx context.Context, cfg ConnConfig) (*conn, error) {
	c := &conn{cfg: cfg, log: cfg.Logger, lost: make(chan struct{})}
	c.life = lifetime.New(context.Background(), translate)
	opts := []natsgo.Option{
		natsgo.Name(cfg.Name),
		natsgo.Timeout(cfg.ConnectTimeout),
		natsgo.ReconnectWait(cfg.ReconnectWait),
		natsgo.MaxReconnects(maxReconnects(cfg.MaxReconnects)),
		natsgo.NoCallbacksAfterClientClose(),
		natsgo.DisconnectErrHandler(c.onDisconnect),
		natsgo.ReconnectHandler(c.onReconnect),
		natsgo.ClosedHandler(c.onClosed),
		natsgo.ErrorHandler(c.onAsyncError),
	}
	switch {
	case cfg.User != "":
		opts = append(opts, natsgo.UserInfo(cfg.User, cfg.Password.Reveal()))
	case cfg.Token != "":
		opts = append(opts, natsgo.Token(cfg.Token.Reveal()))
	case cfg.CredsFile != "":
		opts = append(opts, natsgo.UserCredentials(cfg.CredsFile))
	}
	// natsgo.Connect takes no context; it is bounded by ConnectTimeout per
	// server instead.
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	nc, err := natsgo.Connect(joinURLs(cfg.URLs), opts...)
	if err != nil {
		return nil, translate("connect", err)
	}
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(cfg.RequestTimeout))
	if err != nil {
		nc.Close()
		return nil, translate("connect", err)
	}
	c.nc, c.js = nc, js
	c.log.Debug("nats: connected", "name", cfg.Name, "server", nc.ConnectedUrlRedacted())
	return c, nil
}

func maxReconnects(n int) int {
	if n == 0 {
		return -1 // no cap
	}
	return n
}

func joinURLs(urls []string) string { return strings.Join(urls, ",") }

// markLost closes lost, once per connection loss.
func (c *conn) markLost() {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.lost:
	default:
		close(c.lost)
	}
}

func (c *conn) onDisconnect(nc *natsgo.Conn, err error) {
	c.markLost()
	if err != nil {
		c.log.Warn("nats: connection lost", "name", c.cfg.Name, "err", err)
	} else {
		c.log.Info("nats: disconnected", "name", c.cfg.Name)
	}
}

func (c *conn) onReconnect(nc *natsgo.Conn) {
	c.mu.Lock()
	select {
	case <-c.lost:
		c.lost = make(chan struct{})
	default:
	}
	c.mu.Unlock()
	c.log.Info("nats: reconnected", "name", c.cfg.Name, "server", nc.ConnectedUrlRedacted())
}

func (c *conn) onClosed(*natsgo.Conn) { c.markLost() }

func (c *conn) onAsyncError(_ *natsgo.Conn, sub *natsgo.Subscription, err error) {
	subject := ""
	if sub != nil {
		subject = sub.Subject
	}
	c.log.Warn("nats: asynchronous error", "name", c.cfg.Name, "subject", subject, "err", err)
}

// lostCh returns a channel closed when the connection drops (or is already
// down).
func (c *conn) lostCh() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lost
}

// ready fails when the connection is not up: a call made now would only
// wait for the reconnect.
func (c *conn) ready(op string) error {
	if c.life.Closed() {
		return lifetime.ClosedErr(op)
	}
	switch st := c.nc.Status(); st {
	case natsgo.CONNECTED:
		return nil
	case natsgo.CLOSED:
		return &brokers.Error{Op: op, Retryable: true, Err: errors.New("nats connection closed after its reconnect attempts")}
	default:
		return &brokers.Error{Op: op, Retryable: true, Err: fmt.Errorf("nats connection is %s", st)}
	}
}

func (c *conn) close() {
	c.life.Close()
	if c.nc != nil {
		c.nc.Close()
	}
}

// translate turns a nats.go error into a *brokers.Error that carries the
// client's message but none of its types.
func translate(op string, err error) error {
	return lifetime.Translate(op, err, func(op string, err error) error {
		return &brokers.Error{Op: op, Retryable: retryable(err), Err: errors.New(err.Error())}
	})
}

// retryable says whether a nats.go error may go away on its own.
func retryable(err error) bool {
	var jerr jetstream.JetStreamError
	if errors.As(err, &jerr) && jerr.APIError() != nil {
		switch code := jerr.APIError().Code; {
		case code == 408 || code == 429 || code >= 500:
			return true
		default:
			return false // 400 bad request, 404 stream or consumer not found, ...
		}
	}
	switch {
	case errors.Is(err, natsgo.ErrAuthorization),
		errors.Is(err, natsgo.ErrAuthExpired),
		errors.Is(err, natsgo.ErrAuthRevoked),
		errors.Is(err, natsgo.ErrAccountAuthExpired),
		errors.Is(err, natsgo.ErrPermissionViolation),
		errors.Is(err, natsgo.ErrBadSubject),
		errors.Is(err, natsgo.ErrInvalidArg),
		errors.Is(err, jetstream.ErrInvalidOption),
		errors.Is(err, jetstream.ErrStreamNotFound),
		errors.Is(err, jetstream.ErrConsumerNotFound),
		errors.Is(err, jetstream.ErrBadRequest),
		errors.Is(err, jetstream.ErrMsgNotBound),
		errors.Is(err, jetstream.ErrMsgNoReply),
		errors.Is(err, jetstream.ErrNotJSMessage):
		return false
	}
	// Timeouts, no responders (JetStream not ready yet), a connection that
	// is reconnecting or closed, I/O errors: the call may succeed later.
	return true
}
