package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/kafka"
)

// The rack setting reaches the client: every fetch names it (KIP-392).
func TestRackSentWithFetches(t *testing.T) {
	fc := startCluster(t, 1)
	c := fc.cluster()
	racks := make(chan string, 1)
	c.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if f, ok := req.(*kmsg.FetchRequest); ok {
			select {
			case racks <- f.Rack:
			default:
			}
		}
		return nil, nil, false
	})
	s, err := kafka.New(kafka.Config{Brokers: []string{fc.addr()}, Topic: testTopic, Rack: "eu-west-1a", RequestTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	r, err := s.Open(ctx, "0", brokers.Start{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Fetch(ctx, 10, 100*time.Millisecond); err != nil {
		t.Fatalf("fetch: %v", err)
	}
	select {
	case got := <-racks:
		if got != "eu-west-1a" {
			t.Fatalf("fetch request rack %q, want eu-west-1a", got)
		}
	case <-ctx.Done():
		t.Fatal("no fetch request reached the broker")
	}
}
