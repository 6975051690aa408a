package sqlite_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/persistence"
)

// BenchmarkApplyGroup writes 12 units' batches of 500 changed rows each
// per iteration, as 12 Applies and as one ApplyGroup (alternating, on one
// file), and reports the rows/s of each and their ratio.
//
//	go test -run '^$' -bench ApplyGroup -benchtime 50x ./persistence/sqlite/
func BenchmarkApplyGroup(b *testing.B) { benchApplyGroup(b, 0) }

// BenchmarkApplyGroupPadded is BenchmarkApplyGroup with documents of
// about 200 bytes, the size `drover bench` publishes: a table of 100,000
// of them outgrows SQLite's default page cache.
//
//	go test -run '^$' -bench ApplyGroupPadded -benchtime 30x ./persistence/sqlite/
func BenchmarkApplyGroupPadded(b *testing.B) { benchApplyGroup(b, 150) }

func benchApplyGroup(b *testing.B, pad int) {
	const units, size, keys = 12, 500, 100_000
	padding := strings.Repeat("x", pad)
	ctx := context.Background()
	s, ls, _ := leased(b, benchUnits(units)...)
	pos := 0
	batches := func() []*persistence.Batch {
		bs := make([]*persistence.Batch, units)
		for u := range bs {
			ops := make([]persistence.Op, size)
			for j := range ops {
				pos++
				p := strconv.Itoa(pos)
				ops[j] = persistence.Op{Kind: persistence.OpUpsert, Key: "k" + strconv.Itoa(pos%keys),
					Doc: []byte(`{"id":` + strconv.Itoa(pos%keys) + `,"name":"customer","seq":` + p + `,"pad":"` + padding + `"}`), Position: p}
			}
			bs[u] = &persistence.Batch{Source: "bench", Unit: ls[u].Unit, Lease: ls[u], Table: "bench", Ops: ops, Checkpoint: strconv.Itoa(pos)}
		}
		return bs
	}
	each := func(bs []*persistence.Batch) {
		for _, bt := range bs {
			if _, err := s.Apply(ctx, bt); err != nil {
				b.Fatal(err)
			}
		}
	}
	var groupTook []time.Duration
	group := func(bs []*persistence.Batch) {
		t0 := time.Now()
		rs := s.ApplyGroup(ctx, bs)
		groupTook = append(groupTook, time.Since(t0))
		for _, r := range rs {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
		}
	}
	each(batches()) // the table and statements ready
	groupTook = groupTook[:0]
	var tEach, tGroup time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		x, y := batches(), batches()
		t0 := time.Now()
		if i%2 == 0 {
			each(x)
			t1 := time.Now()
			group(y)
			tEach, tGroup = tEach+t1.Sub(t0), tGroup+time.Since(t1)
		} else {
			group(x)
			t1 := time.Now()
			each(y)
			tGroup, tEach = tGroup+t1.Sub(t0), tEach+time.Since(t1)
		}
	}
	rows := float64(units * size * b.N)
	b.ReportMetric(rows/tEach.Seconds(), "apply-rows/s")
	b.ReportMetric(rows/tGroup.Seconds(), "group-rows/s")
	b.ReportMetric(tEach.Seconds()/tGroup.Seconds(), "group/apply")
	slices.Sort(groupTook)
	if n := len(groupTook); n > 0 {
		b.ReportMetric(float64(groupTook[n/2].Microseconds())/1000, "group-p50-ms")
		b.ReportMetric(float64(groupTook[n-1].Microseconds())/1000, "group-max-ms")
	}
}

// BenchmarkApplyGroupSmall writes groups as they come at half load: 12
// units' batches of 3 or 10 changed rows of 200-byte documents over
// consecutive keys of a 100,000-row table, against one batch of 36 rows
// and one of 3; it reports the time per row, which the fixed costs of a
// batch (fence, checkpoint) and of a transaction dominate in small groups.
//
//	go test -run '^$' -bench ApplyGroupSmall -benchtime 3000x ./persistence/sqlite/
func BenchmarkApplyGroupSmall(b *testing.B) {
	for _, shape := range []struct{ units, rows int }{{12, 3}, {12, 10}, {1, 36}, {1, 3}} {
		b.Run(fmt.Sprintf("%dx%d", shape.units, shape.rows), func(b *testing.B) { benchSmallGroups(b, shape.units, shape.rows) })
	}
}

func benchSmallGroups(b *testing.B, units, size int) {
	const keys = 100_000
	padding := strings.Repeat("x", 150)
	ctx := context.Background()
	s, ls, _ := leased(b, benchUnits(12)...)
	pos := 0
	batches := func(units, size int) []*persistence.Batch {
		bs := make([]*persistence.Batch, units)
		for u := range bs {
			ops := make([]persistence.Op, size)
			for j := range ops {
				pos++
				p := strconv.Itoa(pos)
				ops[j] = persistence.Op{Kind: persistence.OpUpsert, Key: strconv.Itoa(pos % keys),
					Doc: []byte(`{"id":` + strconv.Itoa(pos%keys) + `,"name":"customer","seq":` + p + `,"pad":"` + padding + `"}`), Position: p,
					DocChecked: true} // as the decoder's
			}
			bs[u] = &persistence.Batch{Source: "bench", Unit: ls[u].Unit, Lease: ls[u], Table: "bench", Ops: ops, Checkpoint: strconv.Itoa(pos)}
		}
		return bs
	}
	apply := func(bs []*persistence.Batch) {
		for _, r := range s.ApplyGroup(ctx, bs) {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
		}
	}
	for range keys / 500 { // the table full
		apply(batches(1, 500))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		bs := batches(units, size)
		b.StartTimer()
		apply(bs)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1000/float64(b.N*units*size), "us/row")
}
