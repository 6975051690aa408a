package sqs_test

import (
	"testing"

	"github.com/drover-dev/drover/brokers/brokertest"
)

// TestBrokertest runs every queue definition of the conformance suite
// against fauxqs, on a standard queue. "Server restart" stops a proxy in
// front of the emulator (the adapter sees connections refused, the
// emulator keeps its queues), since fauxqs keeps its data in memory.
func TestBrokertest(t *testing.T) {
	h := newHarness(t)
	brokertest.RunQueue(t, h, brokertest.Plan{Run: []string{
		brokertest.QueueFields,
		brokertest.QueueAck,
		brokertest.QueueNack,
		brokertest.QueueDeadline,
		brokertest.QueueExclusive,
		brokertest.QueueExtend,
		brokertest.QueueMaxWait,
		brokertest.QueueEarlyReturn,
		brokertest.QueueCancel,
		brokertest.QueueClose,
		brokertest.QueueServerRestart,
		brokertest.QueueConnectionLoss,
	}})
}

// TestBrokertestFIFO runs the same definitions on a FIFO queue.
func TestBrokertestFIFO(t *testing.T) {
	h := newHarness(t)
	h.fifo = true
	brokertest.RunQueue(t, h, brokertest.Plan{Run: []string{
		brokertest.QueueFields,
		brokertest.QueueAck,
		brokertest.QueueNack,
		brokertest.QueueDeadline,
		brokertest.QueueExclusive,
		brokertest.QueueExtend,
		brokertest.QueueMaxWait,
		brokertest.QueueEarlyReturn,
		brokertest.QueueCancel,
		brokertest.QueueClose,
		brokertest.QueueServerRestart,
		brokertest.QueueConnectionLoss,
	}})
}
