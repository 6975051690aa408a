package kafka

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/srtest"
)

// Only a 404 with Confluent's not-found error code (40403 for an id,
// 40401/40402 for a subject's version) means the schema is not there; a
// bare 404 (a wrong path or context prefix in the URL, a proxy) or one
// with another code is an error, so that the unit retries instead of
// dead-lettering every message as "not found".
func TestSchemaRegistryOnlyConfluentNotFoundCodesMeanNotFound(t *testing.T) {
	reg := srtest.New(t, "", "")
	reg.Add("rows-value", srtest.Schema{Schema: `"long"`})
	bare := httptest.NewServer(http.HandlerFunc(http.NotFound))
	t.Cleanup(bare.Close)
	coded := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error_code":404,"message":"HTTP 404 Not Found"}`))
	}))
	t.Cleanup(coded.Close)
	client := func(url string) *SchemaRegistry {
		r, err := NewSchemaRegistry(RegistryConfig{URL: url, Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	ctx := context.Background()
	byID := func(url string, id int) regAnswer {
		_, found, err := client(url).SchemaByID(ctx, id)
		return answerOf(found, err)
	}
	byVersion := func(url, subject string, v int) regAnswer {
		_, found, err := client(url).SchemaByVersion(ctx, subject, v)
		return answerOf(found, err)
	}
	for _, c := range []struct {
		name      string
		got, want regAnswer
	}{
		{"id registered", byID(reg.URL(), 1), regAnswer{found: true}},
		{"id unknown (40403)", byID(reg.URL(), 99), regAnswer{}},
		{"version registered", byVersion(reg.URL(), "rows-value", 1), regAnswer{found: true}},
		{"version unknown (40402)", byVersion(reg.URL(), "rows-value", 7), regAnswer{}},
		{"id, wrong path prefix (error_code 404)", byID(reg.URL()+"/wrong", 1), regAnswer{err: "HTTP 404 without a schema registry error code"}},
		{"version, wrong path prefix (error_code 404)", byVersion(reg.URL()+"/wrong", "rows-value", 1), regAnswer{err: "HTTP 404 without"}},
		{"id, bare 404", byID(bare.URL, 1), regAnswer{err: "is the registry URL's path right?"}},
		{"version, bare 404", byVersion(bare.URL, "rows-value", 1), regAnswer{err: "HTTP 404 without"}},
		{"id, coded 404", byID(coded.URL, 1), regAnswer{err: "(error_code 404)"}},
	} {
		if c.got.found != c.want.found || (c.want.err == "") != (c.got.err == "") || !strings.Contains(c.got.err, c.want.err) {
			t.Errorf("%s: found %v, error %q; want found %v, error containing %q", c.name, c.got.found, c.got.err, c.want.found, c.want.err)
		}
	}
}

// regAnswer is what a lookup said: found, and its error ("" for none).
type regAnswer struct {
	found bool
	err   string
}

func answerOf(found bool, err error) regAnswer {
	a := regAnswer{found: found}
	if err != nil {
		a.err = err.Error()
	}
	return a
}
