package quality

import (
	"testing"

	"github.com/drover-dev/drover/persistence"
)

// BenchmarkObserve counts the fields of a typical canonical order event
// against a schema, as a unit actor does for every applied op.
func BenchmarkObserve(b *testing.B) {
	schema, err := ParseSchema("id:text, total:float, status:text, created_at:timestamp, version:int")
	if err != nil {
		b.Fatal(err)
	}
	op := persistence.Op{Kind: persistence.OpUpsert, Doc: []byte(`{"created_at":"2026-11-29T10:11:12Z","currency":"EUR",` +
		`"customer":{"id":"c-98765","name":"Ada Lovelace","tier":"gold"},"id":"ord-000123456","items":[{"price":99.5,"qty":2,"sku":"A-1"},` +
		`{"price":1035.56,"qty":1,"sku":"B-22"}],"status":"paid","tags":["web","promo"],"total":1234.56,"version":7}`)}
	s := New(schema)
	b.SetBytes(int64(len(op.Doc)))
	b.ReportAllocs()
	for b.Loop() {
		s.Observe(op)
	}
	if s.Rows() == 0 || s.docs != s.rows {
		b.Fatalf("observed %d rows, %d documents", s.Rows(), s.docs)
	}
}
