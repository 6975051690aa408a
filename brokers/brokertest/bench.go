package brokertest

import (
	"context"
	"testing"
	"time"

	"github.com/drover-dev/drover/brokers"
)

// This file holds what the adapters' benchmarks share.

// ReceiveAck receives n messages through r, at most max a call with the
// wait given, acking each batch; an error fails tb.
func ReceiveAck(tb testing.TB, ctx context.Context, r brokers.Receiver, n, max int, wait time.Duration) {
	tb.Helper()
	for got := 0; got < n; {
		res, err := r.Receive(ctx, max, wait)
		if err != nil {
			tb.Fatal(err)
		}
		if err := r.Ack(ctx, res.Messages); err != nil {
			tb.Fatal(err)
		}
		got += len(res.Messages)
	}
}

// ReportRates reports a benchmark whose raw client and adapter each
// handled n records in the times given: raw_rec/s, adapter_rec/s,
// adapter_% (the adapter's share of the raw rate) and ns/op as 0 (the
// time per b.N says nothing here).
func ReportRates(b *testing.B, n int, raw, adapter time.Duration) {
	rawRate := float64(n) / raw.Seconds()
	adRate := float64(n) / adapter.Seconds()
	b.ReportMetric(rawRate, "raw_rec/s")
	b.ReportMetric(adRate, "adapter_rec/s")
	b.ReportMetric(100*adRate/rawRate, "adapter_%")
	b.ReportMetric(0, "ns/op")
}
