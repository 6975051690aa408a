package actors

import (
	"runtime/metrics"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

// The node's actor system files its processes in registryBuckets buckets
// (procregistry.go), not protoactor's 1,024, and keeps the processes the
// system made before (the dead-letter and event-stream processes) and the
// node's own actors findable; units passivate and are found again.
func TestNodeRegistryIsCompact(t *testing.T) {
	const parts = 16
	w := newPassiveWorld(t, parts)
	waitUntilf(t, w.state, func() bool { return w.idlePassive(parts) })
	reg := w.n.node.system.ProcessRegistry
	if n := len(reg.LocalPIDs.LocalPIDs); n != registryBuckets {
		t.Fatalf("the node's process registry has %d buckets, want %d", n, registryBuckets)
	}
	for _, id := range []string{"deadletter", "eventstream", w.n.node.leaser.Id} {
		if _, ok := reg.GetLocal(id); !ok {
			t.Errorf("process %q not found after the registry was compacted", id)
		}
	}
	if n := w.unitActors(); n != 0 {
		t.Errorf("%d unit actors left after passivation: %s", n, w.state())
	}
}

// Compacting a system's registry walks protoactor's 32,768 maps in place:
// it starts no goroutine (the maps' Items start one per shard: 32,768 per
// node start, which took a large simulation under -race to the OOM
// killer).
func TestCompactRegistryStartsNoGoroutines(t *testing.T) {
	system := actor.NewActorSystem()
	sample := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(sample)
	before := sample[0].Value.Uint64()
	compactRegistry(system)
	metrics.Read(sample)
	if n := sample[0].Value.Uint64() - before; n > 100 { // room for the runtime's and the test framework's own
		t.Errorf("compacting the registry started %d goroutines, want none", n)
	}
	if _, ok := system.ProcessRegistry.GetLocal("deadletter"); !ok {
		t.Error("the dead-letter process is not found after the registry was compacted")
	}
}
