package debug

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Server is a node's debug endpoint (DESIGN §10).
type Server struct {
	cfg       Config
	client    *http.Client
	ownClient bool
	handler   http.Handler
	tokenSum  [sha256.Size]byte

	mu      sync.Mutex
	started bool
	srv     *http.Server
	addr    string
	done    chan struct{} // closed when Serve has returned
}

// New checks cfg and builds a Server; Start makes it listen.
func New(cfg Config) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, client: cfg.Client, tokenSum: sha256.Sum256([]byte(cfg.Token))}
	if s.client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.Proxy = nil // members are asked directly, never through HTTP_PROXY
		s.client = &http.Client{Transport: tr, Timeout: cfg.FetchTimeout}
		s.ownClient = true
	}
	s.handler = s.routes()
	return s, nil
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
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("debug endpoint: listen on %s: %w", s.cfg.Addr, err)
	}
	s.started = true
	s.addr = ln.Addr().String()
	s.srv = &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       60 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelWarn),
	}
	s.done = make(chan struct{})
	go func(srv *http.Server, done chan struct{}) {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.cfg.Logger.Error("debug endpoint stopped serving", "addr", ln.Addr().String(), "err", err)
		}
	}(s.srv, s.done)
	s.cfg.Logger.Info("debug endpoint listening", "addr", s.addr, "auth", s.cfg.Token != "")
	return nil
}

// Addr is the address the server listens on (the bound port when
// Config.Addr asked for port 0), or "" before Start.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Shutdown stops accepting connections, waits for requests in flight (a
// cluster request waits at most FetchTimeout for the other members) and
// for the serving goroutine. When ctx ends first it closes every
// connection at once and returns ctx's error. Shutdown before Start, or a
// second time, returns nil.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	srv, done := s.srv, s.done
	s.srv = nil
	s.mu.Unlock()
	if srv == nil {
		return nil
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
	mux.HandleFunc("GET /debug/{$}", s.page)
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
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" || s.authorized(r) {
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
	var v any
	switch scope := r.URL.Query().Get("scope"); scope {
	case "", "node":
		v = normalize(s.cfg.Node.Tree())
	case "cluster":
		v = s.clusterTree(r.Context())
	default:
		text(w, http.StatusBadRequest, fmt.Sprintf("scope %q: must be node or cluster", scope))
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		s.cfg.Logger.Error("debug endpoint: encode tree", "err", err)
		text(w, http.StatusInternalServerError, "encode tree: "+err.Error())
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	_, _ = w.Write(append(b, '\n'))
}

func text(w http.ResponseWriter, code int, msg string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = fmt.Fprintln(w, msg)
}
