package node_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
)

// Google Pub/Sub end to end on pstest: one topic, two subscriptions (one
// per source), so each source sees every message under the same message
// id.
func TestE2EPubSub(t *testing.T) {
	const (
		project  = "drover-e2e"
		topic    = "projects/" + project + "/topics/events"
		deadline = 3 * time.Second // ack deadline: node 1's unacked messages come back after it
	)
	srv := pstest.NewServer()
	t.Cleanup(func() { _ = srv.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := srv.GServer.CreateTopic(ctx, &pubsubpb.Topic{Name: topic}); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	subs := []string{"orders", "audit"}
	for _, sub := range subs {
		if _, err := srv.GServer.CreateSubscription(ctx, &pubsubpb.Subscription{
			Name: "projects/" + project + "/subscriptions/" + sub, Topic: topic, AckDeadlineSeconds: int32(deadline / time.Second),
		}); err != nil {
			t.Fatalf("create subscription %s: %v", sub, err)
		}
	}
	msgs := e2eWorkload(t, 31, true, false)
	sent := make([]e2eMsg, len(msgs))
	for i, m := range msgs {
		var attrs map[string]string
		if m.Key != nil {
			attrs = map[string]string{"key": string(m.Key)}
		}
		m.ID = srv.Publish(topic, m.Value, attrs)
		m.Position = m.ID
		sent[i] = e2eMsg{Msg: m}
	}

	rec := &e2eSource{Name: "ps-orders", Table: "ps_orders", Queue: true, Slots: 2, Sent: sent}
	aud := &e2eSource{Name: "ps-audit", Audit: true, Queue: true, Slots: 2, Sent: sent}
	section := func(sub string) string {
		return fmt.Sprintf("project: %s\nsubscription: %s\nendpoint: %q", project, sub, srv.Addr)
	}
	runE2E(t, e2eRun{
		StoreURL:    e2eSQLiteURL(t),
		Sources:     []*e2eSource{rec, aud},
		SourcesYAML: rec.YAML("pubsub", section("orders")) + aud.YAML("pubsub", section("audit")),
		// pstest counts an ack only for a message's current delivery and
		// then forgets the message on that subscription: every message
		// acked on both subscriptions is exactly two acks.
		Drained: func(context.Context) (bool, string) {
			var short, over int
			example := ""
			for _, m := range srv.Messages() {
				switch {
				case m.Acks < len(subs):
					short++
					example = m.ID
				case m.Acks > len(subs):
					over++
					example = m.ID
				}
			}
			return short == 0 && over == 0, fmt.Sprintf("%d messages acked on fewer than %d subscriptions, %d acked more often, e.g. %s",
				short, len(subs), over, example)
		},
	})
	redelivered := 0
	for _, m := range srv.Messages() {
		redelivered += m.Deliveries - len(subs)
	}
	t.Logf("pstest delivered %d messages more than once per subscription", redelivered)
}
