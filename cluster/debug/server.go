package debug

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Server is a node's debug endpoint (architecture §10).
type Server struct {
	cfg       Config
	client    *http.Client
	ownClient bool
	handler   http.Handler
	tokenSum  [sha256.Size]byte
	adminSum  [sha256.Size]byte // of Config.AdminToken
	tls       *tls.Config       // serving; nil: plain HTTP

	// flight is the cluster fan-out in progress, shared by every cluster
	// request that comes while it runs (see clusterJSON).
	flightMu sync.Mutex
	flight   *flight
	// waiters counts the cluster requests waiting on another's fan-out.
	waiters atomic.Int64
	// connState, when set before Start, hears net/http's connection
	// states (tests).
	connState func(net.Conn, http.ConnState)
	// listen, when set before Start, replaces net.Listen (tests: an
	// in-memory listener in a synctest bubble).
	listen func(network, addr string) (net.Listener, error)

	// gone remembers the members that left the view; hist is the ring
	// of cluster samples behind GET /debug/history.
	gone *goneMemory
	hist *history
	// stopSampling ends the background sampler Start runs; sampling is
	// closed when it has returned. Nil before Start or without sampler.
	stopSampling context.CancelFunc
	sampling     chan struct{}

	mu      sync.Mutex
	started bool
	srv     *http.Server
	addr    string
	done    chan struct{} // closed when Serve has returned
}

// maxPEMBytes bounds each PEM file New reads.
const maxPEMBytes = 1 << 20

// New checks cfg and builds a Server; Start makes it listen. With
// Config.TLSCert it reads the certificate and key (and Config.TLSCA), and
// fails naming node.debug_tls when they cannot be used.
func New(cfg Config) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, client: cfg.Client, tokenSum: sha256.Sum256([]byte(cfg.Token)),
		adminSum: sha256.Sum256([]byte(cfg.AdminToken)),
		gone:     newGoneMemory(cfg.GoneFor, cfg.MaxGone), hist: newHistory(cfg.SampleEvery)}
	if cfg.TLSCert != "" {
		cert, err := readPEM("node.debug_tls.cert", cfg.TLSCert)
		if err != nil {
			return nil, err
		}
		key, err := readPEM("node.debug_tls.key", cfg.TLSKey)
		if err != nil {
			return nil, err
		}
		pair, err := tls.X509KeyPair(cert, key)
		if err != nil {
			// crypto/tls names PEM block types, never their content.
			return nil, fmt.Errorf("node.debug_tls: certificate %s with key %s: %w", cfg.TLSCert, cfg.TLSKey, err)
		}
		s.tls = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	}
	var roots *x509.CertPool // nil: the system's
	if cfg.TLSCA != "" {
		ca, err := readPEM("node.debug_tls.ca", cfg.TLSCA)
		if err != nil {
			return nil, err
		}
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(ca) {
			return nil, fmt.Errorf("node.debug_tls.ca: %s holds no PEM certificate", cfg.TLSCA)
		}
	}
	if s.client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.Proxy = nil // members are asked directly, never through HTTP_PROXY
		tr.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		// A member's answer is its tree or an error: a redirect is not
		// followed (it could carry the token elsewhere on that host).
		s.client = &http.Client{Transport: tr, Timeout: cfg.FetchTimeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		s.ownClient = true
	}
	s.handler = s.routes()
	return s, nil
}

// readPEM reads a PEM file of at most maxPEMBytes; errors name field and
// path, never the content. Only a regular file is opened: a FIFO would
// block the open, a device need not end.
func readPEM(field, path string) ([]byte, error) {
	if fi, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %s is not a regular file", field, path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPEMBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: read %s: %w", field, path, err)
	}
	if len(b) > maxPEMBytes {
		return nil, fmt.Errorf("%s: %s is larger than %d bytes: not a PEM file", field, path, maxPEMBytes)
	}
	return b, nil
}

// Handler serves the endpoint's routes, authentication included. Start
// serves it; tests and embedders may mount it themselves.
func (s *Server) Handler() http.Handler { return s.handler }

// Start listens on Config.Addr and serves from a goroutine the Server owns
// until Shutdown. It returns once the listener is bound.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return ErrStarted
	}
	listen := net.Listen
	if s.listen != nil {
		listen = s.listen
	}
	ln, err := listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("debug endpoint: listen on %s: %w", s.cfg.Addr, err)
	}
	s.started = true
	s.addr = ln.Addr().String()
	if s.tls != nil {
		ln = tls.NewListener(ln, s.tls)
	}
	s.srv = &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		ReadTimeout:       s.cfg.ReadTimeout,
		WriteTimeout:      s.cfg.WriteTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		ConnState:         s.connState,
		ErrorLog:          slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelWarn),
	}
	s.done = make(chan struct{})
	go func(srv *http.Server, done chan struct{}) {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.cfg.Logger.Error("debug endpoint stopped serving", "addr", ln.Addr().String(), "err", err)
		}
	}(s.srv, s.done)
	if s.cfg.SampleEvery > 0 {
		ctx, cancel := context.WithCancel(context.Background())
		s.stopSampling, s.sampling = cancel, make(chan struct{})
		go s.sampleLoop(ctx, s.sampling)
	}
	s.cfg.Logger.Info("debug endpoint listening", "addr", s.addr, "auth", s.cfg.Token != "", "tls", s.tls != nil)
	return nil
}

// URL is the address of the page (http://ADDR/debug/, or https:// with
// TLS), or "" before Start.
func (s *Server) URL() string {
	a := s.Addr()
	if a == "" {
		return ""
	}
	if s.tls != nil {
		return "https://" + a + "/debug/"
	}
	return "http://" + a + "/debug/"
}

// Addr is the address the server listens on (the bound port when
// Config.Addr asked for port 0), or "" before Start.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Shutdown stops the background sampler (waiting for a sample in flight,
// FetchTimeout at most), then stops accepting connections, waits for requests in flight (a
// cluster request waits at most FetchTimeout for the other members) and
// for the serving goroutine. When ctx ends first it closes every
// connection at once and returns ctx's error. Shutdown before Start, or a
// second time, returns nil.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	srv, done := s.srv, s.done
	stop, sampling := s.stopSampling, s.sampling
	s.srv, s.stopSampling = nil, nil
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	if stop != nil {
		stop()
		<-sampling // a sample in flight ends within FetchTimeout
	}
	err := srv.Shutdown(ctx)
	if err != nil {
		_ = srv.Close()
		err = fmt.Errorf("debug endpoint shutdown: %w", err)
	}
	<-done // Serve returns at once after Shutdown or Close
	if s.ownClient {
		s.client.CloseIdleConnections()
	}
	return err
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { text(w, http.StatusOK, "ok") })
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.HandleFunc("GET /debug/tree", s.tree)
	mux.HandleFunc("GET /debug/history", s.serveHistory)
	mux.HandleFunc("GET /debug/events", s.events)
	mux.HandleFunc("GET /debug/{$}", s.page)
	mux.HandleFunc("POST /debug/control/{action}", s.control)
	mux.HandleFunc("GET /debug/audit", s.audit)
	mux.Handle("GET /debug", http.RedirectHandler("/debug/", http.StatusMovedPermanently))
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.cfg.Registry, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelWarn),
		ErrorHandling: promhttp.ContinueOnError,
	}))
	return s.auth(mux)
}

// auth lets a request through when no token is configured, when it asks
// for /healthz or /readyz (probes), or when it carries the token: in the Authorization header
// (Bearer), or — for the HTML page only, which a browser opens without
// headers — in a token query parameter. The page sends the header itself
// when it polls.
func (s *Server) auth(next http.Handler) http.Handler {
	if s.cfg.Token == "" {
		// Without a token the endpoint is on loopback (New refuses
		// another address): it answers only requests for a loopback
		// host name, so that a page whose name was rebound to 127.0.0.1
		// (DNS rebinding) cannot read it from a browser either.
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/healthz" && r.URL.Path != "/readyz" && !loopbackHost(r.Host) {
				text(w, http.StatusForbidden, "forbidden: an endpoint without a token answers only for a loopback host name (127.0.0.1, [::1], localhost); set node.debug_token to reach it under another name")
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The controls check their own token (adminAuthorized).
		if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" || strings.HasPrefix(r.URL.Path, "/debug/control/") || s.authorized(r) {
			next.ServeHTTP(w, r)
			return
		}
		s.cfg.Logger.Debug("debug endpoint: unauthorized request", "path", r.URL.Path, "remote", r.RemoteAddr)
		w.Header().Set("WWW-Authenticate", `Bearer realm="drover debug"`)
		text(w, http.StatusUnauthorized, `unauthorized: this endpoint needs the debug token (node.debug_token) as "Authorization: Bearer <token>"; in a browser open /debug/?token=<token>`)
	})
}

func (s *Server) authorized(r *http.Request) bool {
	var given string
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return false
		}
		given = strings.TrimSpace(tok)
	} else if r.URL.Path == "/debug/" {
		given = r.URL.Query().Get("token")
	}
	if given == "" {
		return false
	}
	// Comparing digests keeps the time independent of the token's length.
	sum := sha256.Sum256([]byte(given))
	return subtle.ConstantTimeCompare(sum[:], s.tokenSum[:]) == 1
}

// readyz answers without the token, as orchestrators' probes cannot carry
// a secret header; the reason it is not ready (which may name hosts) is
// told only to callers with the token.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if err := s.cfg.Node.Ready(); err != nil {
		if s.cfg.Token != "" && !s.authorized(r) {
			text(w, http.StatusServiceUnavailable, "not ready")
			return
		}
		text(w, http.StatusServiceUnavailable, "not ready: "+err.Error())
		return
	}
	text(w, http.StatusOK, "ready")
}

func (s *Server) tree(w http.ResponseWriter, r *http.Request) {
	var b []byte
	var err error
	switch scope := r.URL.Query().Get("scope"); scope {
	case "", "node":
		b, err = json.Marshal(normalize(s.cfg.Node.Tree()))
	case "cluster":
		b, err = s.clusterJSON(r.Context())
		if err != nil && r.Context().Err() != nil {
			return // the client is gone: nobody to answer
		}
	default:
		text(w, http.StatusBadRequest, fmt.Sprintf("scope %q: must be node or cluster", scope))
		return
	}
	s.writeJSON(w, "tree", b, err)
}

// writeJSON answers b, a JSON document, and a newline; or, when err says
// that encoding what failed, 500 with the error. b may be shared with
// other requests: it is never appended to.
func (s *Server) writeJSON(w http.ResponseWriter, what string, b []byte, err error) {
	s.writeJSONStatus(w, http.StatusOK, what, b, err)
}

// writeJSONStatus is writeJSON answering code.
func (s *Server) writeJSONStatus(w http.ResponseWriter, code int, what string, b []byte, err error) {
	if err != nil {
		s.cfg.Logger.Error("debug endpoint: encode "+what, "err", err)
		text(w, http.StatusInternalServerError, "encode "+what+": "+err.Error())
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(b)
	_, _ = io.WriteString(w, "\n")
}

func text(w http.ResponseWriter, code int, msg string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = fmt.Fprintln(w, msg)
}
