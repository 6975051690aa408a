package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/drover-dev/drover/persistence"
)

// runLoop is figure (c): what a hand-written consumer of the same topic
// with the same SQL achieves. One franz-go client reads every partition
// directly from its start; each body is decoded with encoding/json; a
// partition's messages are cut into batches of Options.Batch, and a
// partial batch goes out once it is Options.MaxWait old or its partition
// is read to its end; batches are folded (an unnest upsert cannot touch a
// key twice) and written by the ceiling's workers, partition p by worker
// p mod workers.
func (e *env) runLoop(ctx context.Context, addr string, w *workload, out io.Writer) (float64, error) {
	const table = "bench_loop"
	if err := e.db.create(ctx, table); err != nil {
		return 0, err
	}
	ends := w.ends()
	limit := 60*time.Second + time.Duration(w.messages)*time.Millisecond // 1,000 msg/s at least
	ctx, cancelAll := context.WithTimeout(ctx, limit)
	defer cancelAll()
	began := time.Now()
	parts := map[int32]kgo.Offset{}
	for p := range w.partitions {
		parts[int32(p)] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{table: parts}))
	if err != nil {
		return 0, fmt.Errorf("loop: %w", err)
	}
	defer cl.Close()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	n := e.db.workers()
	work := make([]chan *sqlBatch, n)
	for i := range work {
		work[i] = make(chan *sqlBatch, 4)
	}
	errc := make(chan error, 1)
	go func() {
		err := writeAll(ctx, n, func(ctx context.Context, i int) error {
			for {
				select {
				case b, ok := <-work[i]:
					if !ok {
						return nil
					}
					if err := e.db.write(ctx, table, table, b); err != nil {
						return err
					}
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		})
		if err != nil {
			cancel() // the reader stops sending at once, not at the time limit
		}
		errc <- err
	}()

	type pending struct {
		ops   []persistence.Op
		since time.Time
		done  bool // read to its end
	}
	buf := make([]pending, w.partitions)
	left := 0
	for p, end := range ends {
		if end >= 0 {
			left++
		} else {
			buf[p].done = true
		}
	}
	send := func(p int) bool {
		b := fold(fmt.Sprintf("%s/%d", table, p), buf[p].ops)
		buf[p].ops = nil
		select {
		case work[p%n] <- b:
			return true
		case <-ctx.Done():
			return false
		}
	}
	var loopErr error
	for left > 0 && loopErr == nil {
		pctx, pcancel := context.WithTimeout(ctx, e.o.MaxWait)
		fs := cl.PollRecords(pctx, 10_000)
		pcancel()
		if ctx.Err() != nil {
			loopErr = ctx.Err()
			break
		}
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && loopErr == nil {
				loopErr = err
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			p := int(r.Partition)
			pb := &buf[p]
			if pb.done || r.Offset > ends[p] || loopErr != nil {
				return
			}
			key, doc, err := plainDecode(r.Value)
			if err != nil {
				loopErr = fmt.Errorf("decode %d/%d: %w", p, r.Offset, err)
				return
			}
			if len(pb.ops) == 0 {
				pb.since = time.Now()
			}
			pb.ops = append(pb.ops, persistence.Op{Kind: persistence.OpUpsert, Key: key, Doc: doc, Position: strconv.FormatInt(r.Offset, 10)})
			if r.Offset == ends[p] {
				pb.done = true
				left--
			}
			if (len(pb.ops) >= e.o.Batch || pb.done) && !send(p) {
				loopErr = ctx.Err()
			}
		})
		now := time.Now()
		for p := range buf {
			if len(buf[p].ops) > 0 && now.Sub(buf[p].since) >= e.o.MaxWait && !send(p) {
				loopErr = ctx.Err()
			}
		}
	}
	for _, c := range work {
		close(c)
	}
	if loopErr != nil {
		// stopped by the writers (their failure cancelled ctx), or by its
		// own error (a fetch or decode), which the writers' cancellation
		// must not hide
		byWriters := errors.Is(loopErr, context.Canceled)
		cancel()
		if werr := <-errc; byWriters && werr != nil && !errors.Is(werr, context.Canceled) {
			loopErr = werr
		}
		return 0, fmt.Errorf("loop: %w", loopErr)
	}
	if err := <-errc; err != nil {
		return 0, fmt.Errorf("loop: %w", err)
	}
	took := time.Since(began)
	rate := float64(w.messages) / took.Seconds()
	if err := e.checkCount(ctx, table, w); err != nil {
		return 0, fmt.Errorf("loop: %w", err)
	}
	fmt.Fprintf(out, "loop: %d messages in %s = %.0f msg/s (one franz-go client, encoding/json, batches of %d or %s, the ceiling's SQL and writers)\n",
		w.messages, took.Round(time.Millisecond), rate, e.o.Batch, e.o.MaxWait)
	return rate, nil
}
