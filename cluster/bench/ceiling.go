package bench

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"
)

// runCeiling is figure (b): the messages decoded and folded before the
// clock starts, then written by the store's SQL alone.
func (e *env) runCeiling(ctx context.Context, w *workload, out io.Writer) (float64, error) {
	const table = "bench_ceiling"
	batches, err := w.decoded(table, e.o.Batch)
	if err != nil {
		return 0, err
	}
	if err := e.db.create(ctx, table); err != nil {
		return 0, err
	}
	n := e.db.workers()
	// partition p's batches go to worker p mod n, in order: per partition
	// order holds, as it does in drover
	queues := make([][]*sqlBatch, n)
	for _, b := range batches {
		p := partitionOf(b.unit)
		queues[p%n] = append(queues[p%n], b)
	}
	limit := 60*time.Second + time.Duration(w.messages)*time.Millisecond // 1,000 msg/s at least
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	began := time.Now()
	err = writeAll(ctx, n, func(ctx context.Context, i int) error {
		for _, b := range queues[i] {
			if err := e.db.write(ctx, table, table, b); err != nil {
				return err
			}
		}
		return nil
	})
	took := time.Since(began)
	if err != nil {
		return 0, fmt.Errorf("ceiling: %w", err)
	}
	rate := float64(w.messages) / took.Seconds()
	if err := e.checkCount(ctx, table, w); err != nil {
		return 0, fmt.Errorf("ceiling: %w", err)
	}
	fmt.Fprintf(out, "ceiling: %d messages in %s = %.0f msg/s (%d batches pre-decoded and folded, written by %s; upsert + checkpoint per batch)\n",
		w.messages, took.Round(time.Millisecond), rate, len(batches), e.writers())
	return rate, nil
}

// writers says how the ceiling and the loop write.
func (e *env) writers() string {
	if n := e.db.workers(); n > 1 {
		return fmt.Sprintf("%d concurrent workers, one pipelined unnest upsert + checkpoint each", n)
	}
	return "one connection, one immediate transaction each with a prepared upsert per row"
}

// checkCount checks that table holds one row per key.
func (e *env) checkCount(ctx context.Context, table string, w *workload) error {
	n, err := e.db.count(ctx, table)
	if err != nil {
		return err
	}
	if want := min(w.keys, w.messages); n != want {
		return fmt.Errorf("%d rows in %s, want %d", n, table, want)
	}
	return nil
}

// writeAll runs fn(i) for i in [0, n) concurrently and returns the first
// error; the first error cancels the others' context.
func writeAll(ctx context.Context, n int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error // the first failure; the others' cancellation follows from it
	)
	for i := range n {
		wg.Go(func() {
			if err := fn(ctx, i); err != nil {
				once.Do(func() { first = err })
				cancel()
			}
		})
	}
	wg.Wait()
	return first
}

func partitionOf(unit string) int {
	_, p, _ := strings.Cut(unit, "/")
	n, _ := strconv.Atoi(p)
	return n
}
