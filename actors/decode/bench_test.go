package decode

import (
	"testing"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/persistence"
)

// event is a typical 300-byte order event.
const event = `{"id":"ord-000123456","customer":{"id":"c-98765","name":"Ada Lovelace","tier":"gold"},` +
	`"status":"paid","total":1234.56,"currency":"EUR","items":[{"sku":"A-1","qty":2,"price":99.5},` +
	`{"sku":"B-22","qty":1,"price":1035.56}],"created_at":"2026-11-29T10:11:12Z","tags":["web","promo"],"version":7}`

func BenchmarkRecord(b *testing.B) {
	cfg := Config{KeyField: "id"}
	m := brokers.Message{Position: "42", Key: []byte("ord-000123456"), Value: []byte(event)}
	b.SetBytes(int64(len(event)))
	b.ReportAllocs()
	for b.Loop() {
		if op := cfg.Record(m); op.Kind != persistence.OpUpsert {
			b.Fatalf("kind %v: %s", op.Kind, op.Reason)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
}
