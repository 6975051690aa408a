package brokertest

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/drover-dev/drover/brokers"
)

// StreamHarness connects the suite to a stream adapter and its server.
type StreamHarness interface {
	// NewStream creates a fresh, empty stream (topic) with the given number
	// of partitions and returns its fixture. The harness removes what it
	// created with t.Cleanup.
	NewStream(t *testing.T, partitions int) StreamFixture
}

// StreamFixture is one fresh stream on the server.
type StreamFixture interface {
	// Open returns a new instance of the adapter under test reading this
	// stream. The suite closes it; the harness may close it again in
	// t.Cleanup (a second Close must be harmless).
	Open(t *testing.T) brokers.Stream
	// Produce writes msgs to partition in order, with a client of its own,
	// and returns their positions.
	Produce(ctx context.Context, partition string, msgs ...brokers.Message) ([]string, error)
}

// QueueHarness connects the suite to a queue adapter and its server.
type QueueHarness interface {
	// NewQueue creates a fresh, empty queue (subscription, consumer) and
	// returns its fixture. The harness removes what it created with
	// t.Cleanup.
	NewQueue(t *testing.T, opts QueueOptions) QueueFixture
}

// QueueOptions is what a definition asks of a new queue.
type QueueOptions struct {
	// AckDeadline is the ack deadline the definition wants. The harness sets
	// it, or the nearest its server allows, and reports it through
	// QueueFixture.AckDeadline.
	AckDeadline time.Duration
}

// QueueFixture is one fresh queue on the server.
type QueueFixture interface {
	// Open returns a new instance of the adapter under test on this queue.
	// The suite closes it; a second Close must be harmless.
	Open(t *testing.T) brokers.Queue
	// Send enqueues msgs with a client of its own.
	Send(ctx context.Context, msgs ...brokers.Message) error
	// AckDeadline is the ack deadline in force.
	AckDeadline() time.Duration
}

// PartitionAdder is a StreamFixture that can add partitions to its stream
// while it is being read (Kafka CreatePartitions).
type PartitionAdder interface {
	AddPartitions(ctx context.Context, n int) error
}

// Trimmer is a StreamFixture that can delete a partition's messages before a
// position (Kafka DeleteRecords, retention).
type Trimmer interface {
	Trim(ctx context.Context, partition, before string) error
}

// Resharder is a StreamFixture whose partitions can be split, closing the
// parent (Kinesis SplitShard). Split returns the children.
type Resharder interface {
	Split(ctx context.Context, partition string) ([]string, error)
}

// ServerRestarter is a fixture whose server can be stopped and started
// again on the same address with the same data. StopServer returns once
// the server refuses connections; StartServer once it serves again.
type ServerRestarter interface {
	StopServer(t *testing.T)
	StartServer(t *testing.T)
}

// ConnectionCutter is a fixture whose server can drop every client
// connection it has, once, while staying up.
type ConnectionCutter interface {
	CutConnections(t *testing.T)
}

// LeakIgnorer is a harness that starts goroutines of its own while a
// definition runs (a fake server's per-connection handlers). The close
// definitions ignore the goroutines these options match.
type LeakIgnorer interface {
	IgnoreGoroutines() []goleak.Option
}

// Capability names something a definition needs from a fixture.
type Capability string

// Capabilities a definition may need.
const (
	CanAddPartitions  Capability = "PartitionAdder"
	CanTrim           Capability = "Trimmer"
	CanReshard        Capability = "Resharder"
	CanRestartServer  Capability = "ServerRestarter"
	CanCutConnections Capability = "ConnectionCutter"
	CanExtend         Capability = "brokers.Extender"
)

// fixtureHas tells for each capability of a fixture whether it has it.
var fixtureHas = map[Capability]func(fixture any) bool{
	CanAddPartitions:  is[PartitionAdder],
	CanTrim:           is[Trimmer],
	CanReshard:        is[Resharder],
	CanRestartServer:  is[ServerRestarter],
	CanCutConnections: is[ConnectionCutter],
}

func is[I any](fixture any) bool {
	_, ok := fixture.(I)
	return ok
}

func has(fixture any, c Capability) bool {
	if is, ok := fixtureHas[c]; ok {
		return is(fixture)
	}
	return true // checked by the definition itself
}
