package actors

import (
	"github.com/asynkron/protoactor-go/actor"
	cmap "github.com/orcaman/concurrent-map"
)

// registryBuckets is how many buckets a node's actor system keeps its
// processes in (protoactor's default is 1,024).
//
// protoactor files every process under a bucket of 1,024 concurrent maps of
// 32 Go maps each (32,768 maps), chosen by a hash of the actor's name. A
// Go map keeps the memory it grew to after its entries are deleted, so each
// map that ever held a unit's actor keeps a group of slots (≈ 260 B) for
// the node's life: 10,000 units that passivate (unit_passive.go) and were
// each alive once cost 2.4 MB there although a few hundred actors are
// alive at a time (issue 12 item 5; a heap profile of BenchmarkIdleHeap).
// With 16 buckets (512 maps) the maps hold about as much as the most
// actors alive at once. Lookups by name are rare (a PID caches its
// process), so the fewer locks cost nothing measurable.
const registryBuckets = 16

// compactRegistry moves system's processes to registryBuckets buckets. It
// must be called before the system is handed to anything else: nothing
// may look a process up while it runs.
func compactRegistry(system *actor.ActorSystem) {
	old := system.ProcessRegistry.LocalPIDs
	sm := &actor.SliceMap{LocalPIDs: make([]cmap.ConcurrentMap, registryBuckets)}
	for i := range sm.LocalPIDs {
		sm.LocalPIDs[i] = cmap.New()
	}
	for _, b := range old.LocalPIDs {
		// IterCb walks the shards in place; Items and Keys start a
		// goroutine per shard (32,768 per node start: a second of CPU
		// per node in a large simulation, and gigabytes under -race)
		b.IterCb(func(id string, p any) { sm.GetBucket(id).Set(id, p) })
	}
	system.ProcessRegistry.LocalPIDs = sm
}
