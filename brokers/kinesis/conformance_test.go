package kinesis_test

import (
	"testing"

	"github.com/drover-dev/drover/brokers/brokertest"
)

// TestConformance runs the stream definitions of the conformance suite
// against kinesalite. "Server restart" stops a proxy in front of the
// emulator (the adapter sees connections refused, the emulator keeps its
// streams), since kinesalite keeps its data in memory.
func TestConformance(t *testing.T) {
	h := newHarness(t)
	brokertest.RunStream(t, h, brokertest.Plan{
		Run: []string{
			brokertest.StreamOrder,
			brokertest.StreamReopen,
			brokertest.StreamStart,
			brokertest.StreamUnknownPartition,
			brokertest.StreamMaxWait,
			brokertest.StreamEarlyReturn,
			brokertest.StreamCancel,
			brokertest.StreamClose,
			brokertest.StreamReshardEnd,
			brokertest.StreamServerRestart,
			brokertest.StreamConnectionLoss,
		},
		LeaveOut: map[string]string{
			brokertest.StreamFields: "Kinesis records have no headers, and every record has a partition key (1-256 characters), " +
				"so the headers and the keyless message of this definition cannot be produced; " +
				"TestFields checks key, value and arrival time instead",
			brokertest.StreamDiscovery: "Kinesis adds shards only by resharding (split, merge, UpdateShardCount), " +
				"which closes parents; reshard-end and TestSplitMergeMidStream cover how new shards appear",
			brokertest.StreamTraceContext: "Kinesis records have no headers or attributes: a W3C trace context cannot travel with a record " +
				"(drover starts a trace of its own for each fetch)",
			brokertest.StreamPositionGone: "Kinesis cannot delete records on demand (retention is 24 h at least), so no fixture can trim; " +
				"TestPositionGone opens after a sequence number whose record does not exist, which the reader detects the same way",
		},
	})
}
