package memory_test

import (
	"context"
	"testing"
	"time"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/brokertest"
	"github.com/drover-dev/drover/brokers/memory"
)

// The memory broker is its own server: each fixture is a fresh Stream or
// Queue on the wall clock, and each Open is a new client of it.

type streamHarness struct{}

type streamFixture struct{ s *memory.Stream }

func (streamHarness) NewStream(t *testing.T, partitions int) brokertest.StreamFixture {
	s, err := memory.NewStream(memory.StreamConfig{Partitions: partitions})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return streamFixture{s}
}

func (f streamFixture) Open(*testing.T) brokers.Stream { return f.s.NewClient() }

func (f streamFixture) Produce(_ context.Context, partition string, msgs ...brokers.Message) ([]string, error) {
	return f.s.Produce(partition, msgs...)
}

func (f streamFixture) AddPartitions(_ context.Context, n int) error {
	_, err := f.s.AddPartitions(n)
	return err
}

func (f streamFixture) Trim(_ context.Context, partition, before string) error {
	return f.s.Trim(partition, before)
}

func (f streamFixture) Split(_ context.Context, partition string) ([]string, error) {
	return f.s.Split(partition)
}

type queueHarness struct{}

type queueFixture struct {
	q        *memory.Queue
	deadline time.Duration
}

func (queueHarness) NewQueue(t *testing.T, opts brokertest.QueueOptions) brokertest.QueueFixture {
	q, err := memory.NewQueue(memory.QueueConfig{AckDeadline: opts.AckDeadline})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	return queueFixture{q: q, deadline: opts.AckDeadline}
}

func (f queueFixture) Open(*testing.T) brokers.Queue { return f.q.NewClient() }

func (f queueFixture) Send(_ context.Context, msgs ...brokers.Message) error {
	f.q.Send(msgs...)
	return nil
}

func (f queueFixture) AckDeadline() time.Duration { return f.deadline }

const noNetwork = "the memory broker is in-process: there is no server to restart and no connection to lose (fault injection covers failures: FailNext, Delay, DropAcks)"

func TestConformanceStream(t *testing.T) {
	brokertest.RunStream(t, streamHarness{}, brokertest.Plan{
		Run: []string{
			brokertest.StreamOrder,
			brokertest.StreamFields,
			brokertest.StreamTraceContext,
			brokertest.StreamReopen,
			brokertest.StreamStart,
			brokertest.StreamUnknownPartition,
			brokertest.StreamMaxWait,
			brokertest.StreamEarlyReturn,
			brokertest.StreamCancel,
			brokertest.StreamClose,
			brokertest.StreamDiscovery,
			brokertest.StreamPositionGone,
			brokertest.StreamReshardEnd,
		},
		LeaveOut: map[string]string{
			brokertest.StreamServerRestart:  noNetwork,
			brokertest.StreamConnectionLoss: noNetwork,
		},
	})
}

func TestConformanceQueue(t *testing.T) {
	brokertest.RunQueue(t, queueHarness{}, brokertest.Plan{
		Run: []string{
			brokertest.QueueFields,
			brokertest.QueueTraceContext,
			brokertest.QueueAck,
			brokertest.QueueNack,
			brokertest.QueueDeadline,
			brokertest.QueueExclusive,
			brokertest.QueueExtend,
			brokertest.QueueMaxWait,
			brokertest.QueueEarlyReturn,
			brokertest.QueueCancel,
			brokertest.QueueClose,
		},
		LeaveOut: map[string]string{
			brokertest.QueueServerRestart:  noNetwork,
			brokertest.QueueConnectionLoss: noNetwork,
		},
	})
}
