package decode

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"golang.org/x/sync/singleflight"

	"github.com/drover-dev/drover/brokers"
)

// RegistryConfig says where a source's schemas are: a Confluent-compatible
// schema registry.
type RegistryConfig struct {
	// URL is the registry's base URL (http or https), without credentials.
	URL string
	// Username and Password, when Username is set, are sent as HTTP basic
	// authentication (Confluent Cloud: the API key and secret).
	Username string
	Password brokers.Secret
	// Timeout bounds one registry request; 0 means 10 s.
	Timeout time.Duration
}

// Validate reports a URL that is not http(s) or that carries credentials.
func (c RegistryConfig) Validate() error {
	u, err := url.Parse(c.URL)
	switch {
	case c.URL == "":
		return errors.New("registry url: must be set")
	case err != nil:
		return errors.New("registry url: not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("registry url: the scheme must be http or https, not %q", u.Scheme)
	case u.User != nil:
		return errors.New("registry url: must not carry credentials: set username and password instead")
	case u.Host == "":
		return errors.New("registry url: needs a host")
	}
	return nil
}

// Registry keeps the schemas of wire-format messages by id, fetched from
// a schema registry: each id is fetched once per Registry (concurrent asks
// for one id share one request), and a schema, once fetched and compiled,
// is kept for the Registry's life (a registry never changes the schema of
// an id). An id the registry does not know is asked again at the next
// Resolve that meets it. Safe for concurrent use.
type Registry struct {
	src     SchemaFetcher
	url     string
	timeout time.Duration

	mu    sync.RWMutex
	byID  map[int]*schema
	group singleflight.Group

	requests atomic.Int64
}

// SchemaFetcher is where a Registry gets its schemas: a registry's HTTP
// API (NewRegistry, through franz-go's pkg/sr) or, in the simulator,
// memory. Its methods may block (they run in jobs) and must be safe for
// concurrent use; found is false when the registry answers that it has no
// such schema, err is set when it could not be asked.
type SchemaFetcher interface {
	SchemaByID(ctx context.Context, id int) (s RegistrySchema, found bool, err error)
	SchemaByVersion(ctx context.Context, subject string, version int) (s RegistrySchema, found bool, err error)
}

// RegistrySchema is a registry's schema: its text, its type (AVRO, ""
// meaning AVRO too, PROTOBUF or JSON) and the schemas it refers to.
type RegistrySchema struct {
	Text       string
	Type       string
	References []RegistryReference
}

// RegistryReference is a schema's reference to a subject's version, by
// the name the schema uses for it.
type RegistryReference struct {
	Name, Subject string
	Version       int
}

// NewRegistry makes the client of one registry; it does not connect.
func NewRegistry(c RegistryConfig) (*Registry, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Second
	}
	opts := []sr.ClientOpt{sr.URLs(c.URL), sr.HTTPClient(&http.Client{Timeout: c.Timeout}), sr.UserAgent("drover")}
	if c.Username != "" {
		opts = append(opts, sr.BasicAuth(c.Username, c.Password.Reveal()))
	}
	cl, err := sr.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	return NewRegistryFrom(c.URL, srFetcher{cl}, c.Timeout), nil
}

// NewRegistryFrom is a Registry on src, named name in errors; timeout
// bounds each fetch (0: 10 s).
func NewRegistryFrom(name string, src SchemaFetcher, timeout time.Duration) *Registry {
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	return &Registry{src: src, url: name, timeout: timeout, byID: map[int]*schema{}}
}

// srFetcher is a SchemaFetcher on franz-go's registry client.
type srFetcher struct{ cl *sr.Client }

func (f srFetcher) SchemaByID(ctx context.Context, id int) (RegistrySchema, bool, error) {
	s, err := f.cl.SchemaByID(ctx, id)
	return srSchema(s, err)
}

func (f srFetcher) SchemaByVersion(ctx context.Context, subject string, version int) (RegistrySchema, bool, error) {
	s, err := f.cl.SchemaByVersion(ctx, subject, version)
	return srSchema(s.Schema, err)
}

func srSchema(s sr.Schema, err error) (RegistrySchema, bool, error) {
	var re *sr.ResponseError
	switch {
	case errors.As(err, &re) && re.StatusCode == http.StatusNotFound:
		return RegistrySchema{}, false, nil
	case err != nil:
		return RegistrySchema{}, false, err
	}
	out := RegistrySchema{Text: s.Schema, Type: s.Type.String()}
	for _, r := range s.References {
		out.References = append(out.References, RegistryReference{Name: r.Name, Subject: r.Subject, Version: r.Version})
	}
	return out, true, nil
}

// Requests is how many schema requests the registry was sent (tests).
func (r *Registry) Requests() int64 { return r.requests.Load() }

// schema is one id's entry: its compiled form for the format it was
// fetched for, or why it cannot be used (not found; not parsable).
type schema struct {
	id       int
	typ      string // normalised: AVRO, PROTOBUF, JSON
	notFound bool
	bad      string // the schema cannot be used: parse or compile error
	compiled any    // avro.Schema, protoreflect.FileDescriptor, *jsonschema.Schema
}

func (r *Registry) cached(id int) *schema {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.byID[id]
}

// ErrRegistry wraps every error of a registry that could not be asked
// (unreachable, refusing, failing): the unit retries, nothing is
// dead-lettered for it.
var ErrRegistry = errors.New("schema registry")

// resolve makes sure every schema id in msgs is known: fetched and
// compiled, or known to be missing. It fails only when the registry cannot
// be asked; then nothing of msgs may be decoded yet.
func (r *Registry) resolve(ctx context.Context, msgs []brokers.Message) error {
	var last int = -1
	for _, m := range msgs {
		id, _, err := wireID(m.Value)
		if err != nil || id == last {
			continue
		}
		last = id
		if s := r.cached(id); s != nil && !s.notFound {
			continue
		}
		if _, err, _ := r.group.Do(strconv.Itoa(id), func() (any, error) { return nil, r.fetch(ctx, id) }); err != nil {
			return err
		}
	}
	return nil
}

// fetch asks the registry for schema id and keeps what it says.
func (r *Registry) fetch(ctx context.Context, id int) error {
	if s := r.cached(id); s != nil && !s.notFound {
		return nil // fetched by the call before ours
	}
	// the request is shared by every caller waiting for the id: one
	// caller's end (a unit stopping) must not fail the others' wait
	c, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.timeout)
	defer cancel()
	r.requests.Add(1)
	sch, found, err := r.src.SchemaByID(c, id)
	s := &schema{id: id}
	switch {
	case err != nil:
		return fmt.Errorf("%w %s: schema id %d: %v", ErrRegistry, r.url, id, err)
	case !found:
		s.notFound = true
	default:
		s.typ = normType(sch.Type)
		refs, err := r.references(c, sch.References, 0, map[string]bool{})
		if err != nil {
			return err
		}
		s.compiled, err = compile(sch, refs)
		if err != nil {
			s.bad = err.Error()
		}
	}
	r.mu.Lock()
	r.byID[id] = s
	r.mu.Unlock()
	return nil
}

// reference is one schema a schema refers to, by the name it uses.
type reference struct {
	name, text string
}

// references fetches what refs name, their own references first (so a
// list of them can be parsed in order). A reference that is not found
// makes the schema unusable, not the registry: it is reported through the
// compile error.
func (r *Registry) references(ctx context.Context, refs []RegistryReference, depth int, seen map[string]bool) ([]reference, error) {
	var out []reference
	for _, ref := range refs {
		key := ref.Subject + "/" + strconv.Itoa(ref.Version)
		if seen[key] {
			continue
		}
		seen[key] = true
		if depth > 16 {
			return nil, fmt.Errorf("%w %s: references nested more than 16 deep", ErrRegistry, r.url)
		}
		r.requests.Add(1)
		ss, found, err := r.src.SchemaByVersion(ctx, ref.Subject, ref.Version)
		if err == nil && !found {
			continue // compile names what is missing
		}
		if err != nil {
			return nil, fmt.Errorf("%w %s: reference %s version %d: %v", ErrRegistry, r.url, ref.Subject, ref.Version, err)
		}
		sub, err := r.references(ctx, ss.References, depth+1, seen)
		if err != nil {
			return nil, err
		}
		out = append(out, sub...)
		out = append(out, reference{name: ref.Name, text: ss.Text})
	}
	return out, nil
}
