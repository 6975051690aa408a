package postgres

import (
	"strconv"
	"strings"
	"testing"

	"github.com/drover-dev/drover/persistence"
)

// BenchmarkPlanStream is Apply's client side for a stream batch before
// anything is sent: the 500 ops of one unit's batch (distinct keys, 200-byte
// documents, as drover bench writes) checked, folded last-op-wins, sorted
// by key and laid out as the statements' column arrays. No server.
//
//	go test -run '^$' -bench PlanStream -benchmem ./persistence/postgres/
func BenchmarkPlanStream(b *testing.B) {
	ops := make([]persistence.Op, 500)
	pad := strings.Repeat("x", 120)
	for i := range ops {
		k := strconv.Itoa((i * 7919) % 100000)
		ops[i] = persistence.Op{Kind: persistence.OpUpsert, Key: k, Position: strconv.Itoa(1000 + i),
			Doc: []byte(`{"currency":"EUR","customer":"customer-000042","id":` + k + `,"pad":"` + pad + `","seq":` + strconv.Itoa(i) + `}`)}
	}
	batch := &persistence.Batch{Source: "s", Unit: "s/0", Table: "t", Ops: ops, Checkpoint: ops[len(ops)-1].Position}
	b.ReportAllocs()
	for b.Loop() {
		a := newApplyPlan(batch)
		a.fold(nil)
		if len(a.upKeys) != len(ops) {
			b.Fatalf("%d upserts, want %d", len(a.upKeys), len(ops))
		}
	}
	b.ReportMetric(float64(len(ops)*b.N)/b.Elapsed().Seconds(), "ops/s")
}
