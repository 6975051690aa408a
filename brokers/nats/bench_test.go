package nats

import (
	"context"
	"fmt"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/brokertest"
)

// The benchmarks compare records/s fetched through the adapter with the raw
// jetstream client doing the same reads (same batch size, same server, same
// run), in alternating rounds so that both see the same machine load. They
// report raw_rec/s, adapter_rec/s and adapter_% (target: ≥ 90).

const (
	benchBatch = 100
	benchRound = 2000 // messages per round and side
)

type benchClock struct{ raw, adapter time.Duration }

func (c benchClock) report(b *testing.B, n int) { brokertest.ReportRates(b, n, c.raw, c.adapter) }

// publishN publishes n small JSON messages asynchronously and waits for the
// acks.
func publishN(b *testing.B, js jetstream.JetStream, subject string, n int) {
	b.Helper()
	body := []byte(`{"id":12345,"name":"a typical small record","tags":["x","y"]}`)
	for i := 0; i < n; i++ {
		m := natsgo.NewMsg(subject)
		m.Data = body
		m.Header.Set(DefaultKeyHeader, fmt.Sprint(i))
		if _, err := js.PublishMsgAsync(m); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		b.Fatal("publish did not complete")
	}
}

func benchServer(b *testing.B) (*testServer, *natsgo.Conn, jetstream.JetStream) {
	b.Helper()
	ts := startServer(b)
	nc, js := ts.client(b)
	return ts, nc, js
}

func BenchmarkQueueReceiveAck(b *testing.B) {
	ts, nc, js := benchServer(b)
	ctx := context.Background()
	mk := func(name string) jetstream.Consumer {
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}}); err != nil {
			b.Fatal(err)
		}
		c, err := js.CreateConsumer(ctx, name, jetstream.ConsumerConfig{Durable: "raw", AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 10000})
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	rawCons := mk("BRAW")
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "BAD", Subjects: []string{"BAD.>"}}); err != nil {
		b.Fatal(err)
	}
	q, err := NewQueue(ctx, QueueConfig{Conn: ts.connConfig(), Stream: "BAD", Durable: "drover", MaxAckPending: 10000})
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	r, err := q.OpenReceiver(ctx, "slot-0")
	if err != nil {
		b.Fatal(err)
	}

	var clk benchClock
	total := 0
	b.ResetTimer()
	for total < b.N {
		n := min(benchRound, b.N-total)
		b.StopTimer()
		publishN(b, js, "BRAW.x", n)
		publishN(b, js, "BAD.x", n)
		b.StartTimer()

		start := time.Now()
		for got := 0; got < n; {
			batch, err := rawCons.FetchNoWait(benchBatch)
			if err != nil {
				b.Fatal(err)
			}
			for m := range batch.Messages() {
				// what a consumer applying effectively once needs: the
				// stream sequence (its dedupe id), the body and headers
				if _, err := m.Metadata(); err != nil {
					b.Fatal(err)
				}
				_, _ = m.Data(), m.Headers()
				if err := m.Ack(); err != nil {
					b.Fatal(err)
				}
				got++
			}
			if err := batch.Error(); err != nil {
				b.Fatal(err)
			}
			// The adapter's Ack returns once the server has the acks; the
			// raw reads give the same guarantee.
			if err := nc.Flush(); err != nil {
				b.Fatal(err)
			}
		}
		clk.raw += time.Since(start)

		start = time.Now()
		brokertest.ReceiveAck(b, ctx, r, n, benchBatch, time.Second)
		clk.adapter += time.Since(start)
		total += n
	}
	clk.report(b, total)
}

func BenchmarkStreamFetch(b *testing.B) {
	ts, _, js := benchServer(b)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "BS", Subjects: []string{"BS.x"}}); err != nil {
		b.Fatal(err)
	}
	publishN(b, js, "BS.x", b.N)
	rawCons, err := js.CreateConsumer(ctx, "BS", jetstream.ConsumerConfig{AckPolicy: jetstream.AckNonePolicy, MemoryStorage: true, FilterSubject: "BS.x"})
	if err != nil {
		b.Fatal(err)
	}
	s, err := NewStream(ctx, StreamConfig{Conn: ts.connConfig(), Stream: "BS"})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	r, err := s.OpenReader(ctx, "BS.x", brokers.Start{Mode: brokers.Earliest})
	if err != nil {
		b.Fatal(err)
	}

	var clk benchClock
	b.ResetTimer()
	for done := 0; done < b.N; {
		n := min(benchRound, b.N-done)
		start := time.Now()
		for got := 0; got < n; {
			batch, err := rawCons.FetchNoWait(min(benchBatch, n-got))
			if err != nil {
				b.Fatal(err)
			}
			for m := range batch.Messages() {
				if _, err := m.Metadata(); err != nil { // the sequence, as a reader must know it
					b.Fatal(err)
				}
				_, _ = m.Data(), m.Headers()
				got++
			}
		}
		clk.raw += time.Since(start)

		start = time.Now()
		for got := 0; got < n; {
			res, err := r.Fetch(ctx, min(benchBatch, n-got), time.Second)
			if err != nil {
				b.Fatal(err)
			}
			got += len(res.Messages)
		}
		clk.adapter += time.Since(start)
		done += n
	}
	clk.report(b, b.N)
}
