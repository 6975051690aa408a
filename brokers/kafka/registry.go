package kafka

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/drover-dev/drover/brokers"
)

// RegistryConfig says where a source's schemas are: a Confluent-compatible
// schema registry (decode.registry).
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
	case u.RawQuery != "" || u.Fragment != "":
		// a query may hold a key (api_key=…), and the URL is printed in
		// the registry's errors
		return errors.New("registry url: must not have a query or fragment: set username and password instead")
	case u.Host == "":
		return errors.New("registry url: needs a host")
	}
	return nil
}

// SchemaRegistry is a brokers.SchemaRegistry on franz-go's pkg/sr client:
// GET /schemas/ids/{id} and GET /subjects/{subject}/versions/{version}.
type SchemaRegistry struct{ cl *sr.Client }

// NewSchemaRegistry makes the client of one registry; it does not connect.
// The password goes only into the basic authentication header.
func NewSchemaRegistry(c RegistryConfig) (*SchemaRegistry, error) {
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
	return &SchemaRegistry{cl}, nil
}

// SchemaByID implements brokers.SchemaRegistry.
func (r *SchemaRegistry) SchemaByID(ctx context.Context, id int) (brokers.RegisteredSchema, bool, error) {
	s, err := r.cl.SchemaByID(ctx, id)
	return registered(s, err, sr.ErrSchemaNotFound.Code)
}

// SchemaByVersion implements brokers.SchemaRegistry.
func (r *SchemaRegistry) SchemaByVersion(ctx context.Context, subject string, version int) (brokers.RegisteredSchema, bool, error) {
	s, err := r.cl.SchemaByVersion(ctx, subject, version)
	return registered(s.Schema, err, sr.ErrSubjectNotFound.Code, sr.ErrVersionNotFound.Code)
}

// registered is what the registry answered. Only a 404 carrying one of
// notFound (Confluent's error codes: 40403 schema, 40401 subject, 40402
// version) means the schema is not there; any other 404 (a wrong URL path
// or context prefix, a proxy's bare 404) is the registry failing to
// answer, reported as an error so that nothing is dead-lettered for it.
func registered(s sr.Schema, err error, notFound ...int) (brokers.RegisteredSchema, bool, error) {
	var re *sr.ResponseError
	switch {
	case errors.As(err, &re) && re.StatusCode == http.StatusNotFound && slices.Contains(notFound, re.ErrorCode):
		return brokers.RegisteredSchema{}, false, nil
	case errors.As(err, &re) && re.StatusCode == http.StatusNotFound:
		return brokers.RegisteredSchema{}, false, fmt.Errorf("HTTP 404 without a schema registry error code (error_code %d) from %s: is the registry URL's path right?", re.ErrorCode, re.URL)
	case err != nil:
		return brokers.RegisteredSchema{}, false, err
	}
	out := brokers.RegisteredSchema{Text: s.Schema, Type: s.Type.String()}
	for _, r := range s.References {
		out.References = append(out.References, brokers.SchemaReference{Name: r.Name, Subject: r.Subject, Version: r.Version})
	}
	return out, true, nil
}
