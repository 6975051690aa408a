package postgres

import (
	"fmt"
	"testing"
	"time"

	"github.com/drover-dev/drover/persistence"
)

// BenchmarkApply measures the fenced Apply against its ceiling: the same
// rows written by a bare INSERT ... SELECT FROM unnest(...) ON CONFLICT
// statement in autocommit, with no drover code (no transaction, no fence,
// no checkpoint). Each iteration writes one batch both ways, in
// alternating order, into two tables of the same shape, so both see the
// same server state; every document changes every time, so no upsert is
// skipped as unchanged. It reports rows/s of each and their ratio.
//
//	go test -run '^$' -bench Apply -benchtime 200x ./persistence/postgres/
func BenchmarkApply(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) { benchApply(b, n) })
	}
}

func benchApply(b *testing.B, n int) {
	b.ReportAllocs()
	s := openTest(b, pg.URL(b), Config{})
	ctx := b.Context()
	l := acquire(b, s, "bench/0", "node-1")
	ceiling := newRecordsSQL(s, "ceiling")
	if _, err := s.pool.Exec(ctx, ceiling.create); err != nil {
		b.Fatal(err)
	}
	ceilingSQL := `INSERT INTO ` + ceiling.table + ` AS t (key, doc, source, unit, position, updated_at)
		SELECT u.key, u.doc::jsonb, $4, $5, u.position, now()
		FROM unnest($1::text[], $2::text[], $3::text[]) AS u(key, doc, position)
		ON CONFLICT (key) DO UPDATE SET doc = excluded.doc, source = excluded.source,
			unit = excluded.unit, position = excluded.position, updated_at = excluded.updated_at`

	// The rows of batch i: keys cycle over 10 batches' worth, documents
	// carry i so that they always change.
	const keySpace = 10
	keys := make([]string, n)
	docs := make([][]byte, n)
	positions := make([]string, n)
	ops := make([]persistence.Op, n)
	fill := func(i int) {
		pos := fmt.Sprint(i + 1)
		for j := range n {
			keys[j] = fmt.Sprintf("key-%08d", (i%keySpace)*n+j)
			docs[j] = fmt.Appendf(docs[j][:0], `{"id":%q,"batch":%d,"row":%d,"name":"customer %d","amount":%d.25,"tags":["a","b"]}`,
				keys[j], i, j, j, i+j)
			positions[j] = pos
			ops[j] = persistence.Op{Kind: persistence.OpUpsert, Key: keys[j], Doc: docs[j], Position: pos}
		}
	}
	runCeiling := func() {
		if _, err := s.pool.Exec(ctx, ceilingSQL, keys, docs, positions, "bench", "bench/0"); err != nil {
			b.Fatal(err)
		}
	}
	runApply := func(i int) {
		a, err := s.Apply(ctx, &persistence.Batch{Source: "bench", Unit: "bench/0", Lease: l, Table: "bench",
			Ops: ops, Checkpoint: positions[n-1]})
		if err != nil {
			b.Fatal(err)
		}
		if a.Upserted != n {
			b.Fatalf("batch %d: upserted %d, want %d", i, a.Upserted, n)
		}
	}
	// Warm up: tables created, statements prepared, keys present.
	for i := range keySpace {
		fill(i)
		runCeiling()
		runApply(i)
	}

	var tApply, tCeiling time.Duration
	b.ResetTimer()
	for i := keySpace; i < keySpace+b.N; i++ {
		fill(i)
		if i%2 == 0 {
			t0 := time.Now()
			runCeiling()
			t1 := time.Now()
			runApply(i)
			tCeiling += t1.Sub(t0)
			tApply += time.Since(t1)
		} else {
			t0 := time.Now()
			runApply(i)
			t1 := time.Now()
			runCeiling()
			tApply += t1.Sub(t0)
			tCeiling += time.Since(t1)
		}
	}
	b.StopTimer()
	rows := float64(n * b.N)
	b.ReportMetric(rows/tApply.Seconds(), "apply-rows/s")
	b.ReportMetric(rows/tCeiling.Seconds(), "ceiling-rows/s")
	b.ReportMetric(tCeiling.Seconds()/tApply.Seconds(), "apply/ceiling")
}
