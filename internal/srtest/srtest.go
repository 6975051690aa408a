// Package srtest is a schema registry for tests and the demo: an
// in-process HTTP server
// answering exactly the requests drover's registry client (franz-go's
// pkg/sr) sends — GET /schemas/ids/{id} and GET
// /subjects/{subject}/versions/{version} — from schemas the test adds.
// It can be taken down (every connection is closed unanswered, as an
// unreachable registry) and brought back, and counts the requests per id.
// New ties it to a test's cleanup; Start (`drover demo`) returns it
// running until Close. The package does not import testing.
package srtest

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Schema is one registered schema.
type Schema struct {
	Subject    string      `json:"subject,omitempty"`
	Version    int         `json:"version,omitempty"`
	ID         int         `json:"id,omitempty"`
	Schema     string      `json:"schema"`
	Type       string      `json:"schemaType,omitempty"` // "" (Avro), PROTOBUF, JSON
	References []Reference `json:"references,omitempty"`
}

// Reference is a schema's reference to another subject's version.
type Reference struct {
	Name    string `json:"name"`
	Subject string `json:"subject"`
	Version int    `json:"version"`
}

// Registry is the server.
type Registry struct {
	srv *http.Server
	ln  net.Listener
	url string

	mu       sync.Mutex
	byID     map[int]Schema
	bySubVer map[string]Schema
	versions map[string]int
	nextID   int
	down     bool
	requests map[int]int // GET /schemas/ids/{id} answered or refused, by id
	user     string
	pass     string
}

// Cleaner is what New needs of a test: testing.TB has it.
type Cleaner interface {
	Cleanup(func())
	Fatal(args ...any)
}

// New starts a registry on a free loopback port; t's cleanup stops it.
// With user set, requests must carry HTTP basic authentication user:pass.
func New(t Cleaner, user, pass string) *Registry {
	r, err := Start("127.0.0.1:0", user, pass)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

// Start starts a registry listening on addr ("127.0.0.1:0": a free port);
// Close stops it. user and pass are as for New.
func Start(addr, user, pass string) (*Registry, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("schema registry: listen on %s: %w", addr, err)
	}
	r := &Registry{byID: map[int]Schema{}, bySubVer: map[string]Schema{}, versions: map[string]int{},
		nextID: 1, requests: map[int]int{}, user: user, pass: pass, ln: ln, url: "http://" + ln.Addr().String()}
	r.srv = &http.Server{Handler: http.HandlerFunc(r.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(ln) }() // ends with Close
	return r, nil
}

// Close stops the server and closes its connections.
func (r *Registry) Close() {
	_ = r.srv.Close()
	_ = r.ln.Close() // when Serve had not begun yet
}

// URL is the registry's base URL.
func (r *Registry) URL() string { return r.url }

// Add registers s under subject as its next version and returns its id.
func (r *Registry) Add(subject string, s Schema) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.versions[subject]++
	s.Subject, s.Version, s.ID = subject, r.versions[subject], r.nextID
	r.nextID++
	r.byID[s.ID] = s
	r.bySubVer[subject+"/"+strconv.Itoa(s.Version)] = s
	return s.ID
}

// AddID registers s under subject as its next version with schema id id
// (a producer may have written the id before the test registers it).
func (r *Registry) AddID(subject string, id int, s Schema) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.versions[subject]++
	s.Subject, s.Version, s.ID = subject, r.versions[subject], id
	r.nextID = max(r.nextID, id+1)
	r.byID[s.ID] = s
	r.bySubVer[subject+"/"+strconv.Itoa(s.Version)] = s
}

// SetDown takes the registry down (true: every request's connection is
// closed unanswered) or brings it back.
func (r *Registry) SetDown(down bool) {
	r.mu.Lock()
	r.down = down
	r.mu.Unlock()
}

// Requests is how many times schema id was asked for.
func (r *Registry) Requests(id int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests[id]
}

// Refused is how many requests were refused while down.
func (r *Registry) Refused() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests[-1]
}

func (r *Registry) serve(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	down := r.down
	if down {
		r.requests[-1]++
	}
	r.mu.Unlock()
	if down {
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				c.(*net.TCPConn).SetLinger(0)
				c.Close()
				return
			}
		}
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	if r.user != "" {
		u, p, ok := req.BasicAuth()
		if !ok || u != r.user || p != r.pass {
			reply(w, http.StatusUnauthorized, map[string]any{"error_code": 40101, "message": "Unauthorized"})
			return
		}
	}
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	if req.Method != http.MethodGet {
		reply(w, http.StatusMethodNotAllowed, map[string]any{"error_code": 405, "message": "method not allowed"})
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case len(parts) == 3 && parts[0] == "schemas" && parts[1] == "ids":
		id, err := strconv.Atoi(parts[2])
		if err != nil {
			reply(w, http.StatusNotFound, map[string]any{"error_code": 404, "message": "HTTP 404 Not Found"})
			return
		}
		r.requests[id]++
		s, ok := r.byID[id]
		if !ok {
			reply(w, http.StatusNotFound, map[string]any{"error_code": 40403, "message": "Schema " + parts[2] + " not found"})
			return
		}
		reply(w, http.StatusOK, Schema{Schema: s.Schema, Type: s.Type, References: s.References})
	case len(parts) == 4 && parts[0] == "subjects" && parts[2] == "versions":
		s, ok := r.bySubVer[parts[1]+"/"+parts[3]]
		if !ok {
			reply(w, http.StatusNotFound, map[string]any{"error_code": 40402, "message": "Version not found"})
			return
		}
		reply(w, http.StatusOK, s)
	default:
		reply(w, http.StatusNotFound, map[string]any{"error_code": 404, "message": "HTTP 404 Not Found"})
	}
}

func reply(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
