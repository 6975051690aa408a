package actors

import (
	"strconv"
	"testing"

	"github.com/drover-dev/drover/actors/decode"
	"github.com/drover-dev/drover/actors/quality"
	"github.com/drover-dev/drover/brokers"
)

// benchFetch is a 500-message fetch of 200-byte JSON orders over 100 keys,
// the shape drover bench produces.
func benchFetch() brokers.Result {
	msgs := make([]brokers.Message, 500)
	for i := range msgs {
		k := strconv.Itoa(i % 100)
		msgs[i] = brokers.Message{Position: strconv.Itoa(1000 + i), Key: []byte(k),
			Value: []byte(`{"id":` + k + `,"seq":` + strconv.Itoa(i) + `,"customer":"customer-000042","status":"paid","total":12.34,"currency":"EUR","pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`)}
	}
	return brokers.Result{Messages: msgs}
}

// BenchmarkPrepareFetch is the unit's hot path before the store: decode a
// 500-message fetch into its batch (with the re-read check).
func BenchmarkPrepareFetch(b *testing.B) {
	f := fetchBatching{source: "s", unit: "s/0", table: "t", position: "999", maxBytes: 16 << 20,
		decoder: decode.Config{KeyField: "id"}}
	res := benchFetch()
	b.ReportAllocs()
	for b.Loop() {
		if pb := prepareFetch(f, res); pb == nil || len(pb.batch.Ops) != 500 {
			b.Fatal("prepareFetch did not make the 500-op batch")
		}
	}
	b.ReportMetric(float64(500*b.N)/b.Elapsed().Seconds(), "msg/s")
}

// BenchmarkTallyApply counts what an applied 500-op batch did (the tree
// and metrics figures of every commit).
func BenchmarkTallyApply(b *testing.B) {
	f := fetchBatching{source: "s", unit: "s/0", table: "t", maxBytes: 16 << 20, decoder: decode.Config{KeyField: "id"}}
	ops := prepareFetch(f, benchFetch()).batch.Ops
	var schema quality.Schema
	b.ReportAllocs()
	for b.Loop() {
		if t := tallyApply(ops, nil, nil, schema); t.applied == 0 {
			b.Fatal("nothing tallied")
		}
	}
}
