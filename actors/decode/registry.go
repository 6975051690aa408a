package decode

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/drover-dev/drover/brokers"
)

// Registry keeps the schemas of wire-format messages by id, fetched from
// a schema registry: each id is fetched once per Registry (concurrent asks
// for one id share one request), and a schema, once fetched and compiled,
// is kept for the Registry's life (a registry never changes the schema of
// an id), as is one whose own text does not compile. An id the registry
// does not know, or one of whose references it does not find, is not
// kept: it is asked again at the next Resolve that meets it (a reference
// missing for a moment, as on a failover, does not make the id unusable
// for good). Safe for concurrent use.
type Registry struct {
	src     brokers.SchemaRegistry
	url     string
	timeout time.Duration

	mu    sync.RWMutex
	byID  map[int]*schema
	group singleflight.Group
}

// NewRegistryFrom is a Registry on src (brokers/kafka.NewSchemaRegistry,
// or one in memory), named name in errors (its URL); timeout
// bounds each fetch (0: 10 s).
func NewRegistryFrom(name string, src brokers.SchemaRegistry, timeout time.Duration) *Registry {
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	return &Registry{src: src, url: name, timeout: timeout, byID: map[int]*schema{}}
}

// schema is one id's entry: its compiled form for the format it was
// fetched for, or why it cannot be used (not found; not parsable).
type schema struct {
	id       int
	typ      string // normalised: AVRO, PROTOBUF, JSON
	notFound bool   // the id, or a reference (missing), is not in the registry: asked again
	missing  string // the reference not found, "" when it is the id itself
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
	var asked map[int]bool // this call's: an unknown id is asked once per fetch
	for _, m := range msgs {
		id, _, err := wireID(m.Value)
		if err != nil || asked[id] {
			continue
		}
		if s := r.cached(id); s != nil && !s.notFound {
			continue
		}
		if asked == nil {
			asked = map[int]bool{}
		}
		asked[id] = true
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
	sch, found, err := r.src.SchemaByID(c, id)
	s := &schema{id: id}
	switch {
	case err != nil:
		return fmt.Errorf("%w %s: schema id %d: %v", ErrRegistry, r.url, id, err)
	case !found:
		s.notFound = true
	default:
		s.typ = normType(sch.Type)
		refs, missing, err := r.references(c, sch.References, 0, map[string]bool{})
		switch {
		case err != nil:
			return err
		case missing != "":
			// not the schema's fault: not cached as bad, asked again
			s.notFound, s.missing = true, missing
		default:
			if s.compiled, err = compile(sch, refs); err != nil {
				s.bad = err.Error()
			}
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
// list of them can be parsed in order). A reference the registry does not
// find is returned as missing (its name, subject and version), and the
// schema is then treated as not found: not compiled, not kept.
func (r *Registry) references(ctx context.Context, refs []brokers.SchemaReference, depth int, seen map[string]bool) (_ []reference, missing string, _ error) {
	var out []reference
	for _, ref := range refs {
		key := ref.Subject + "/" + strconv.Itoa(ref.Version)
		if seen[key] {
			continue
		}
		seen[key] = true
		if depth > 16 {
			return nil, "", fmt.Errorf("%w %s: references nested more than 16 deep", ErrRegistry, r.url)
		}
		ss, found, err := r.src.SchemaByVersion(ctx, ref.Subject, ref.Version)
		if err != nil {
			return nil, "", fmt.Errorf("%w %s: reference %s version %d: %v", ErrRegistry, r.url, ref.Subject, ref.Version, err)
		}
		if !found {
			return nil, fmt.Sprintf("%q (subject %s version %d)", ref.Name, ref.Subject, ref.Version), nil
		}
		sub, missing, err := r.references(ctx, ss.References, depth+1, seen)
		if err != nil || missing != "" {
			return nil, missing, err
		}
		out = append(out, sub...)
		out = append(out, reference{name: ref.Name, text: ss.Text})
	}
	return out, "", nil
}
