package pubsub

import (
	"context"
	"fmt"
	"testing"
	"time"

	vkit "cloud.google.com/go/pubsub/v2/apiv1"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/drover-dev/drover/brokers/brokertest"
)

// BenchmarkReceiveAck compares records/s received and acked through the
// adapter with the raw apiv1 client doing the same Pulls and Acknowledges
// (same batch size, same pstest, same run), in alternating rounds. It
// reports raw_rec/s, adapter_rec/s and adapter_% (target: ≥ 90).
func BenchmarkReceiveAck(b *testing.B) {
	const batch, round = 100, 1000
	srv := pstest.NewServer()
	defer srv.Close()
	ctx := context.Background()
	mk := func(name string) string {
		topic := "projects/" + testProject + "/topics/" + name
		sub := "projects/" + testProject + "/subscriptions/" + name
		if _, err := srv.GServer.CreateTopic(ctx, &pubsubpb.Topic{Name: topic}); err != nil {
			b.Fatal(err)
		}
		if _, err := srv.GServer.CreateSubscription(ctx, &pubsubpb.Subscription{Name: sub, Topic: topic, AckDeadlineSeconds: 60}); err != nil {
			b.Fatal(err)
		}
		return topic
	}
	rawTopic, adTopic := mk("raw-bench"), mk("adapter-bench")
	rawSub := "projects/" + testProject + "/subscriptions/raw-bench"

	raw, err := vkit.NewSubscriptionAdminClient(ctx, option.WithEndpoint(srv.Addr), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())), option.WithTelemetryDisabled())
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	q, err := NewQueue(ctx, Config{Project: testProject, Subscription: "adapter-bench", Endpoint: srv.Addr, Insecure: true, MaxMessages: batch})
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	r, err := q.OpenReceiver(ctx, "slot-0")
	if err != nil {
		b.Fatal(err)
	}

	body := []byte(`{"id":12345,"name":"a typical small record","tags":["x","y"]}`)
	publish := func(topic string, n int) {
		msgs := make([]*pubsubpb.PubsubMessage, n)
		for i := range msgs {
			msgs[i] = &pubsubpb.PubsubMessage{Data: body, Attributes: map[string]string{"key": fmt.Sprint(i)}}
		}
		if _, err := srv.GServer.Publish(ctx, &pubsubpb.PublishRequest{Topic: topic, Messages: msgs}); err != nil {
			b.Fatal(err)
		}
	}

	var rawT, adT time.Duration
	b.ResetTimer()
	for done := 0; done < b.N; {
		n := min(round, b.N-done)
		b.StopTimer()
		publish(rawTopic, n)
		publish(adTopic, n)
		b.StartTimer()

		start := time.Now()
		for got := 0; got < n; {
			resp, err := raw.Pull(ctx, &pubsubpb.PullRequest{Subscription: rawSub, MaxMessages: batch, ReturnImmediately: true}) //nolint:staticcheck // as the adapter
			if err != nil {
				b.Fatal(err)
			}
			ids := make([]string, 0, len(resp.ReceivedMessages))
			for _, m := range resp.ReceivedMessages {
				_ = m.GetMessage().GetData()
				ids = append(ids, m.GetAckId())
			}
			if len(ids) > 0 {
				if err := raw.Acknowledge(ctx, &pubsubpb.AcknowledgeRequest{Subscription: rawSub, AckIds: ids}); err != nil {
					b.Fatal(err)
				}
			}
			got += len(ids)
		}
		rawT += time.Since(start)

		start = time.Now()
		brokertest.ReceiveAck(b, ctx, r, n, batch, time.Second)
		adT += time.Since(start)
		done += n
	}
	brokertest.ReportRates(b, b.N, rawT, adT)
}
