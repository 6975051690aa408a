package kafka_test

import (
	"testing"

	"github.com/drover-dev/drover/brokers/brokertest"
)

// TestConformance runs the brokertest stream definitions against kfake,
// a fresh in-process cluster per definition.
func TestConformance(t *testing.T) {
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
			brokertest.StreamServerRestart,
			brokertest.StreamConnectionLoss,
		},
		LeaveOut: map[string]string{
			brokertest.StreamReshardEnd: "Kafka partitions are never split, merged or closed: a reader never reaches an end, and partitions have no parents",
		},
	})
}
