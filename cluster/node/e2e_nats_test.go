package node_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/internal/testserver"
	"github.com/drover-dev/drover/testkit"
)

// NATS JetStream end to end on an embedded nats-server, in both shapes:
// two queue-mode sources (two durable consumers of one limits stream, so
// each sees every message), and two stream-mode sources reading a stream
// of two subjects (partitions) in order. Each shape is its own run, so
// that each run's kill lands in the middle of its own data (queue and
// stream sources go at different speeds).
func TestE2ENATS(t *testing.T) {
	url, _, js := e2eJetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, sc := range []jetstream.StreamConfig{
		{Name: "E2EQ", Subjects: []string{"e2eq"}, Retention: jetstream.LimitsPolicy},
		{Name: "E2ES", Subjects: []string{"e2es.0", "e2es.1"}, Retention: jetstream.LimitsPolicy},
	} {
		if _, err := js.CreateStream(ctx, sc); err != nil {
			t.Fatalf("create stream %s: %v", sc.Name, err)
		}
	}

	t.Run("queue", func(t *testing.T) {
		sent := e2ePublishNATS(ctx, t, js, "E2EQ", e2eWorkload(t, 21, true, false), true, func(brokers.Message) string { return "e2eq" })
		rec := &e2eSource{Name: "q-orders", Table: "q_orders", Queue: true, Slots: 2, Sent: sent}
		aud := &e2eSource{Name: "q-audit", Audit: true, Queue: true, Slots: 2, Sent: sent}
		section := func(consumer string) string {
			return fmt.Sprintf("url: %q\nstream: E2EQ\nmode: queue\nconsumer: %s\nack_wait: 3s", url, consumer)
		}
		runE2E(t, e2eRun{
			StoreURL:    e2eSQLiteURL(t),
			Sources:     []*e2eSource{rec, aud},
			SourcesYAML: rec.YAML("nats", section("rec")) + aud.YAML("nats", section("aud")),
			// Both durable consumers acked every message.
			Drained: func(ctx context.Context) (bool, string) {
				for _, name := range []string{"rec", "aud"} {
					c, err := js.Consumer(ctx, "E2EQ", name)
					if err != nil {
						return false, fmt.Sprintf("consumer %s: %v", name, err)
					}
					info, err := c.Info(ctx)
					if err != nil {
						return false, fmt.Sprintf("consumer %s: %v", name, err)
					}
					if info.NumPending != 0 || info.NumAckPending != 0 || info.AckFloor.Stream != uint64(len(sent)) {
						return false, fmt.Sprintf("consumer %s: %d pending, %d ack pending, ack floor %d of %d",
							name, info.NumPending, info.NumAckPending, info.AckFloor.Stream, len(sent))
					}
				}
				return true, ""
			},
		})
	})

	t.Run("stream", func(t *testing.T) {
		sent := e2ePublishNATS(ctx, t, js, "E2ES", e2eWorkload(t, 22, false, false), false, func(m brokers.Message) string {
			return "e2es." + testkit.PartitionOf(m, 2)
		})
		rec := &e2eSource{Name: "s-orders", Table: "s_orders", Sent: sent}
		aud := &e2eSource{Name: "s-audit", Audit: true, Sent: sent}
		section := fmt.Sprintf("url: %q\nstream: E2ES\nmode: stream", url)
		runE2E(t, e2eRun{
			StoreURL:    e2eSQLiteURL(t),
			Sources:     []*e2eSource{rec, aud},
			SourcesYAML: rec.YAML("nats", section) + aud.YAML("nats", section),
		})
	})
}

// e2eStartNATS starts an embedded JetStream server for the test.
func e2eStartNATS(t *testing.T) string {
	t.Helper()
	return e2eRunNATS(t, e2eNATSOptions(t)).ClientURL()
}

// e2eJetStream starts an embedded server (e2eStartNATS) and connects to it
// until the test ends: the server's URL, the connection and its JetStream.
func e2eJetStream(t *testing.T) (string, *natsgo.Conn, jetstream.JetStream) {
	t.Helper()
	url := e2eStartNATS(t)
	nc, err := natsgo.Connect(url)
	if err != nil {
		testserver.SkipOrFail(t, fmt.Sprintf("connect to the embedded NATS server at %s: %v", url, err))
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return url, nc, js
}

// e2eNATSOptions are the options of an embedded JetStream server on a free
// local port, storing under a folder of the test.
func e2eNATSOptions(t *testing.T) *server.Options {
	return &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true}
}

// e2eRunNATS runs an embedded server of opts until the test ends.
func e2eRunNATS(t *testing.T, opts *server.Options) *server.Server {
	t.Helper()
	s, err := server.NewServer(opts)
	if err != nil {
		testserver.SkipOrFail(t, "embedded NATS server: "+err.Error())
	}
	go s.Start()
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	if !s.ReadyForConnections(10 * time.Second) {
		testserver.SkipOrFail(t, "embedded NATS server: not ready for connections after 10s")
	}
	return s
}

// e2ePublishNATS publishes msgs to stream, each on the subject subject
// gives it, and returns them as the sources see them: the stream sequence
// is a stream message's position and its subject its partition;
// "<stream>:<stream created, Unix ns>:<sequence>" is a queue message's id
// and position.
func e2ePublishNATS(ctx context.Context, t *testing.T, js jetstream.JetStream, stream string, msgs []brokers.Message, queue bool, subject func(brokers.Message) string) []e2eMsg {
	t.Helper()
	out := make([]e2eMsg, 0, len(msgs))
	var created string // a queue id names the stream's creation time
	if queue {
		st, err := js.Stream(ctx, stream)
		if err != nil {
			t.Fatalf("stream %s: %v", stream, err)
		}
		created = strconv.FormatInt(st.CachedInfo().Created.UnixNano(), 10)
	}
	for start := 0; start < len(msgs); start += 1000 { // below the client's limit of pending async publishes
		chunk := msgs[start:min(start+1000, len(msgs))]
		futures := make([]jetstream.PubAckFuture, len(chunk))
		for i, m := range chunk {
			f, err := js.PublishAsync(subject(m), m.Value)
			if err != nil {
				t.Fatalf("publish: %v", err)
			}
			futures[i] = f
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-ctx.Done():
			t.Fatalf("publish: %v", ctx.Err())
		}
		for i, f := range futures {
			var ack *jetstream.PubAck
			select {
			case ack = <-f.Ok():
			case err := <-f.Err():
				t.Fatalf("publish %d: %v", start+i, err)
			}
			m, seq := chunk[i], strconv.FormatUint(ack.Sequence, 10)
			if queue {
				m.ID = stream + ":" + created + ":" + seq
				m.Position = m.ID
				out = append(out, e2eMsg{Msg: m})
			} else {
				m.Position = seq
				out = append(out, e2eMsg{Part: subject(m), Msg: m})
			}
		}
	}
	return out
}
