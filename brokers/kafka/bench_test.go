package kafka_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/kafka"
)

type rawRecord struct {
	key, value []byte
	offset     int64
	headers    []kgo.RecordHeader
	ts         time.Time
}

// BenchmarkFetch reads the same records from kfake through the adapter and
// through a raw franz-go client doing the same direct partition read, in
// the same run, and reports records/s for each. Both hand every record's
// key, value, offset, headers and timestamp to their caller. Each iteration opens a
// client, reads every record from the start, and closes it; opening and
// closing are outside the timer in both, so the figures compare the read
// path (the adapter's Open also checks metadata, a one-off per unit).
func BenchmarkFetch(b *testing.B) {
	const (
		records = 100_000
		batch   = 1000
	)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, testTopic))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	prod, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ProducerBatchMaxBytes(1<<20))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	value := make([]byte, 100)
	for i := 0; i < records; i += batch {
		recs := make([]*kgo.Record, batch)
		for j := range recs {
			recs[j] = &kgo.Record{Topic: testTopic, Key: []byte(fmt.Sprint(i + j)), Value: value}
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			b.Fatal(err)
		}
	}
	prod.Close()

	b.Run("adapter", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			s, err := kafka.New(kafka.Config{Brokers: []string{addr}, Topic: testTopic})
			if err != nil {
				b.Fatal(err)
			}
			r, err := s.Open(ctx, "0", brokers.Start{Mode: brokers.Earliest})
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			for n := 0; n < records; {
				res, err := r.Fetch(ctx, 10_000, time.Second)
				if err != nil {
					b.Fatal(err)
				}
				n += len(res.Messages)
			}
			b.StopTimer()
			_ = s.Close()
			b.StartTimer()
		}
		b.ReportMetric(float64(records*b.N)/b.Elapsed().Seconds(), "records/s")
	})
	b.Run("raw", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			cl, err := kgo.NewClient(kgo.SeedBrokers(addr),
				kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{testTopic: {0: kgo.NewOffset().AtStart()}}))
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			for n := 0; n < records; {
				pctx, cancel := context.WithTimeout(ctx, time.Second)
				fs := cl.PollRecords(pctx, 10_000)
				cancel()
				if err := fs.Err0(); err != nil && err != context.DeadlineExceeded {
					b.Fatal(err)
				}
				// hand every record's fields to the caller, as any consumer
				// does (and as the adapter does with brokers.Message)
				out := make([]rawRecord, 0, fs.NumRecords())
				fs.EachRecord(func(r *kgo.Record) {
					out = append(out, rawRecord{key: r.Key, value: r.Value, offset: r.Offset, headers: r.Headers, ts: r.Timestamp})
				})
				n += len(out)
			}
			b.StopTimer()
			cl.Close()
			b.StartTimer()
		}
		b.ReportMetric(float64(records*b.N)/b.Elapsed().Seconds(), "records/s")
	})
}

// BenchmarkOpenPartitions resolves and opens a reader of every partition
// of a 1,024-partition topic, 64 at a time, as a node taking over its
// units does, and reports partitions opened per second.
func BenchmarkOpenPartitions(b *testing.B) {
	const partitions = 1024
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, testTopic))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	for range b.N {
		s, err := kafka.New(kafka.Config{Brokers: c.ListenAddrs(), Topic: testTopic})
		if err != nil {
			b.Fatal(err)
		}
		var (
			wg   sync.WaitGroup
			fail atomic.Value
		)
		sem := make(chan struct{}, 64)
		for p := range partitions {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				id := strconv.Itoa(p)
				start, err := s.Resolve(ctx, id, brokers.Earliest)
				if err == nil {
					_, err = s.Open(ctx, id, start)
				}
				if err != nil {
					fail.Store(err)
				}
			}()
		}
		wg.Wait()
		b.StopTimer()
		_ = s.Close()
		if err, _ := fail.Load().(error); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(partitions*b.N)/b.Elapsed().Seconds(), "partitions/s")
}
