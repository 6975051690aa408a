package node

import (
	"log/slog"
	"sync"
	"time"

	"github.com/drover-dev/drover/actors/placement"
)

// mixedCapWarnEvery is the least time between two logs of mixedCapWarner.
const mixedCapWarnEvery = 30 * time.Second

// mixedCapWarner logs when the alive members gossip different
// cluster.max_capacity values (a rolling change of the value, or a
// misconfigured node): a WARN naming the members, their values and the
// clamp placement uses, once per change of that set, and an INFO when they
// agree again. A change less than mixedCapWarnEvery after the last log is
// logged at the first view change after that, if still current, so a
// flapping view does not flood the log. Safe for concurrent use.
type mixedCapWarner struct {
	log *slog.Logger
	own float64 // this node's cluster.max_capacity

	mu     sync.Mutex
	logged string    // the placement.MaxCapacityMismatch last logged
	at     time.Time // when
}

// observe looks at a view of the members, at time now.
func (w *mixedCapWarner) observe(members []placement.Member, now time.Time) {
	mixed := placement.MaxCapacityMismatch(members)
	w.mu.Lock()
	defer w.mu.Unlock()
	if mixed == w.logged || (!w.at.IsZero() && now.Sub(w.at) < mixedCapWarnEvery) {
		return
	}
	w.logged, w.at = mixed, now
	limit := placement.EffectiveMaxCapacity(members, w.own)
	if mixed == "" {
		w.log.Info("members agree on cluster.max_capacity again", "max_capacity", limit)
		return
	}
	w.log.Warn("members gossip different cluster.max_capacity values; placement clamps capacities to the smallest",
		"members", mixed, "effective_max_capacity", limit)
}
