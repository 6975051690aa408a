package sqs_test

import (
	"testing"

	"github.com/drover-dev/drover/brokers/brokertest"
)

// plan runs every queue definition of the conformance suite, on a
// standard queue and on a FIFO queue alike. "Server restart" stops a proxy
// in front of the emulator (the adapter sees connections refused, the
// emulator keeps its queues), since fauxqs keeps its data in memory.
var plan = brokertest.Plan{Run: []string{
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
	brokertest.QueueServerRestart,
	brokertest.QueueConnectionLoss,
}}

// TestConformance runs the plan against fauxqs on a standard queue.
func TestConformance(t *testing.T) {
	brokertest.RunQueue(t, newHarness(t), plan)
}

// TestConformanceFIFO runs the same plan on a FIFO queue.
func TestConformanceFIFO(t *testing.T) {
	h := newHarness(t)
	h.fifo = true
	brokertest.RunQueue(t, h, plan)
}
