package nats

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/brokertest"
)

// The brokertest plans. Definitions that need a server the tests control
// (restart, cut connections) are left out when DROVER_TEST_NATS_URL points
// at an external server.

var streamLeaveOut = map[string]string{
	brokertest.StreamFields: "nats.go decodes message headers into a map (nats.Header), so the order of headers with different names is lost; " +
		"the adapter returns them sorted by name, the values of one name in order. TestStreamFields checks key, value, headers and time without the cross-name order.",
	brokertest.StreamReshardEnd: "JetStream streams are not split or merged: a partition (subject) never ends.",
}

var queueLeaveOut = map[string]string{}

func plan(defs []brokertest.Definition, leaveOut map[string]string, external bool) brokertest.Plan {
	p := brokertest.Plan{LeaveOut: map[string]string{}}
	for _, d := range defs {
		reason, out := leaveOut[d.Name]
		if !out && external {
			for _, c := range d.Needs {
				if c == brokertest.CanRestartServer || c == brokertest.CanCutConnections {
					reason, out = "DROVER_TEST_NATS_URL names an external server, which the test cannot restart or make drop connections", true
				}
			}
		}
		if out {
			p.LeaveOut[d.Name] = reason
		} else {
			p.Run = append(p.Run, d.Name)
		}
	}
	return p
}

func TestConformanceStream(t *testing.T) {
	h := streamHarness{}
	brokertest.RunStream(t, h, plan(brokertest.StreamDefinitions(), streamLeaveOut, isExternal()))
}

func TestConformanceQueue(t *testing.T) {
	h := queueHarness{}
	brokertest.RunQueue(t, h, plan(brokertest.QueueDefinitions(), queueLeaveOut, isExternal()))
}

func isExternal() bool { return os.Getenv("DROVER_TEST_NATS_URL") != "" }

// --- stream harness ---

type streamHarness struct{}

type streamFixture struct {
	*testServer
	name string
	js   jetstream.JetStream
	st   jetstream.Stream
}

func (streamHarness) NewStream(t *testing.T, partitions int) brokertest.StreamFixture {
	ts := startServer(t)
	_, js := ts.client(t)
	name := uniqueName("S")
	subjects := make([]string, partitions)
	for i := range subjects {
		subjects[i] = name + "." + strconv.Itoa(i)
	}
	st := ts.createStream(t, js, jetstream.StreamConfig{Name: name, Subjects: subjects, Storage: jetstream.FileStorage})
	f := &streamFixture{testServer: ts, name: name, js: js, st: st}
	if ts.external {
		return externalStreamFixture{f}
	}
	return f
}

func (f *streamFixture) Open(t *testing.T) brokers.Stream {
	t.Helper()
	s, err := NewStream(context.Background(), StreamConfig{Conn: f.connConfig(), Stream: f.name})
	if err != nil {
		t.Fatalf("NewStream: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func (f *streamFixture) Produce(ctx context.Context, partition string, msgs ...brokers.Message) ([]string, error) {
	out := make([]string, 0, len(msgs))
	for _, m := range msgs {
		ack, err := publish(ctx, f.js, natsMsg(partition, m))
		if err != nil {
			return out, err
		}
		out = append(out, strconv.FormatUint(ack.Sequence, 10))
	}
	return out, nil
}

func (f *streamFixture) AddPartitions(ctx context.Context, n int) error {
	info, err := f.st.Info(ctx)
	if err != nil {
		return err
	}
	cfg := info.Config
	for i := range n {
		cfg.Subjects = append(cfg.Subjects, f.name+"."+strconv.Itoa(len(info.Config.Subjects)+i))
	}
	_, err = f.js.UpdateStream(ctx, cfg)
	return err
}

// Trim purges the partition's messages before sequence before.
func (f *streamFixture) Trim(ctx context.Context, partition, before string) error {
	seq, err := strconv.ParseUint(before, 10, 64)
	if err != nil {
		return err
	}
	return f.st.Purge(ctx, jetstream.WithPurgeSubject(partition), jetstream.WithPurgeSequence(seq))
}

// externalStreamFixture hides the restart and cut capabilities.
type externalStreamFixture struct{ f *streamFixture }

func (e externalStreamFixture) Open(t *testing.T) brokers.Stream { return e.f.Open(t) }
func (e externalStreamFixture) Produce(ctx context.Context, p string, m ...brokers.Message) ([]string, error) {
	return e.f.Produce(ctx, p, m...)
}
func (e externalStreamFixture) AddPartitions(ctx context.Context, n int) error {
	return e.f.AddPartitions(ctx, n)
}
func (e externalStreamFixture) Trim(ctx context.Context, p, before string) error {
	return e.f.Trim(ctx, p, before)
}

// publish publishes m, trying again (with the same Nats-Msg-Id, so the
// stream stores it once) when an attempt gets no answer in 2 s: right after
// a connection is cut the client may still write to the dead socket.
func publish(ctx context.Context, js jetstream.JetStream, m *natsgo.Msg) (*jetstream.PubAck, error) {
	m.Header.Set(jetstream.MsgIDHeader, natsgo.NewInbox())
	for {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		ack, err := js.PublishMsg(actx, m)
		cancel()
		if err == nil || ctx.Err() != nil {
			return ack, err
		}
		select { // a pause before the next attempt, not a synchronisation
		case <-ctx.Done():
			return nil, err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// natsMsg is m as a NATS message: the key in the "key" header.
func natsMsg(subject string, m brokers.Message) *natsgo.Msg {
	nm := natsgo.NewMsg(subject)
	nm.Data = m.Value
	for _, h := range m.Headers {
		nm.Header.Add(h.Key, string(h.Value))
	}
	if m.Key != nil {
		nm.Header.Set(DefaultKeyHeader, string(m.Key))
	}
	return nm
}

// --- queue harness ---

type queueHarness struct{}

type queueFixture struct {
	*testServer
	name     string
	subject  string
	js       jetstream.JetStream
	deadline time.Duration
}

func (queueHarness) NewQueue(t *testing.T, opts brokertest.QueueOptions) brokertest.QueueFixture {
	ts := startServer(t)
	_, js := ts.client(t)
	name := uniqueName("Q")
	ts.createStream(t, js, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}, Storage: jetstream.FileStorage})
	d := opts.AckDeadline
	if d <= 0 {
		d = DefaultAckWait
	}
	f := &queueFixture{testServer: ts, name: name, subject: name + ".jobs", js: js, deadline: d}
	if ts.external {
		return externalQueueFixture{f}
	}
	return f
}

func (f *queueFixture) config() QueueConfig {
	return QueueConfig{Conn: f.connConfig(), Stream: f.name, Durable: "drover", AckWait: f.deadline}
}

func (f *queueFixture) Open(t *testing.T) brokers.Queue {
	t.Helper()
	q, err := NewQueue(context.Background(), f.config())
	if err != nil {
		t.Fatalf("NewQueue: %v", err)
	}
	t.Cleanup(func() { _ = q.Close() })
	return q
}

func (f *queueFixture) Send(ctx context.Context, msgs ...brokers.Message) error {
	for _, m := range msgs {
		if _, err := publish(ctx, f.js, natsMsg(f.subject, m)); err != nil {
			return fmt.Errorf("publish: %w", err)
		}
	}
	return nil
}

func (f *queueFixture) AckDeadline() time.Duration { return f.deadline }

type externalQueueFixture struct{ f *queueFixture }

func (e externalQueueFixture) Open(t *testing.T) brokers.Queue { return e.f.Open(t) }
func (e externalQueueFixture) Send(ctx context.Context, m ...brokers.Message) error {
	return e.f.Send(ctx, m...)
}
func (e externalQueueFixture) AckDeadline() time.Duration { return e.f.deadline }
