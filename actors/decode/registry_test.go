package decode

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/internal/srtest"
	"github.com/drover-dev/drover/persistence"
)

// A registry URL with a wrong path (a missing context prefix, a proxy
// answering a bare 404 to everything) is a registry that cannot be asked,
// not "schema id N not found": Resolve fails with ErrRegistry (the unit
// retries) and no message is dead-lettered for it.
func TestRegistryBare404IsARegistryErrorNotSchemaNotFound(t *testing.T) {
	bare := httptest.NewServer(http.HandlerFunc(http.NotFound))
	t.Cleanup(bare.Close)
	reg := srtest.New(t, "", "")
	reg.AddID("rows-value", 7, srtest.Schema{Schema: `"long"`})
	for _, url := range []string{bare.URL, reg.URL() + "/wrong-prefix"} {
		c := Config{Format: FormatAvro, Registry: newRegistry(t, url)}
		m := brokers.Message{Position: "1", Key: []byte("k"), Value: []byte{0, 0, 0, 0, 7, 2}}
		err := c.Resolve(context.Background(), []brokers.Message{m})
		if !errors.Is(err, ErrRegistry) {
			t.Errorf("%s: resolve with every answer a bare 404: %v, want ErrRegistry (the message would be dead-lettered as %q)",
				url, err, c.Record(m).Reason)
		}
	}
}

// flakyRefs is a registry whose reference is not found the first time it
// is asked for (replica lag, a failover), then found.
type flakyRefs struct{ byID, refCalls atomic.Int32 }

const (
	refInner = `{"type":"record","name":"Inner","namespace":"x","fields":[{"name":"a","type":"long"}]}`
	refOuter = `{"type":"record","name":"Outer","namespace":"x","fields":[{"name":"in","type":"x.Inner"}]}`
)

func (f *flakyRefs) SchemaByID(context.Context, int) (brokers.RegisteredSchema, bool, error) {
	f.byID.Add(1)
	return brokers.RegisteredSchema{Text: refOuter, Type: "AVRO", References: []brokers.SchemaReference{{Name: "x.Inner", Subject: "inner", Version: 1}}}, true, nil
}

func (f *flakyRefs) SchemaByVersion(context.Context, string, int) (brokers.RegisteredSchema, bool, error) {
	if f.refCalls.Add(1) == 1 {
		return brokers.RegisteredSchema{}, false, nil
	}
	return brokers.RegisteredSchema{Text: refInner, Type: "AVRO"}, true, nil
}

// A reference the registry does not find once makes its id not found for
// that fetch (the message's dead letter names the reference), not unusable
// for the node's life: the next Resolve asks again, and once the reference
// is back the id decodes and is kept.
func TestRegistryReferenceMissingOnceIsAskedAgain(t *testing.T) {
	src := &flakyRefs{}
	c := Config{Format: FormatAvro, Registry: NewRegistryFrom("mem", src, 0)}
	m := brokers.Message{Position: "1", Key: []byte("k"), Value: []byte{0, 0, 0, 0, 7, 2}} // id 7, Outer{in:{a:1}}
	want := []struct {
		kind   persistence.OpKind
		reason string
	}{
		{persistence.OpDeadLetter, `schema id 7: its reference "x.Inner" (subject inner version 1) not found in the registry`},
		{persistence.OpUpsert, ""},
		{persistence.OpUpsert, ""},
	}
	for i, w := range want {
		if err := c.Resolve(context.Background(), []brokers.Message{m}); err != nil {
			t.Fatal(err)
		}
		if op := c.Record(m); op.Kind != w.kind || op.Reason != w.reason {
			t.Errorf("try %d: %v %q, want %v %q", i, op.Kind, op.Reason, w.kind, w.reason)
		}
	}
	if n := src.byID.Load(); n != 2 {
		t.Errorf("schema id 7 asked %d times, want 2 (again after the missing reference, then kept)", n)
	}
}

// The same through the HTTP client: a reference whose subject is not
// registered yet (a 404 with error code 40402) is not found, and is found
// once it is.
func TestRegistryReferenceRegisteredLaterDecodes(t *testing.T) {
	reg := srtest.New(t, "", "")
	reg.AddID("outer-value", 7, srtest.Schema{Schema: refOuter, References: []srtest.Reference{{Name: "x.Inner", Subject: "inner", Version: 1}}})
	c := Config{Format: FormatAvro, Registry: newRegistry(t, reg.URL())}
	m := brokers.Message{Position: "1", Key: []byte("k"), Value: []byte{0, 0, 0, 0, 7, 2}}
	if err := c.Resolve(context.Background(), []brokers.Message{m}); err != nil {
		t.Fatal(err)
	}
	if op, want := c.Record(m), `schema id 7: its reference "x.Inner" (subject inner version 1) not found in the registry`; op.Reason != want {
		t.Fatalf("reference not registered: %v %q, want %q", op.Kind, op.Reason, want)
	}
	reg.Add("inner", srtest.Schema{Schema: refInner})
	if err := c.Resolve(context.Background(), []brokers.Message{m}); err != nil {
		t.Fatal(err)
	}
	if op := c.Record(m); op.Kind != persistence.OpUpsert || string(op.Doc) != `{"in":{"a":1}}` {
		t.Fatalf("reference registered: %v %q %s", op.Kind, op.Reason, op.Doc)
	}
}
