package testkit

import (
	"maps"
	"slices"
	"sync"
)

// stateMetrics is a node's actors.Metrics in the simulator: it keeps what
// the runtime reported of each unit's state (UnitState, Forget), the part
// of the metrics an invariant checks against the tree. The counters are
// not kept.
type stateMetrics struct {
	mu     sync.Mutex
	states map[string]string // "source|unit" → the state last reported
}

func newStateMetrics() *stateMetrics { return &stateMetrics{states: map[string]string{}} }

func (*stateMetrics) Received(string, string, int64, int64)       {}
func (*stateMetrics) Applied(string, string, int64, int64, int64) {}
func (*stateMetrics) Acked(string, string, int64)                 {}
func (*stateMetrics) Restarted(string, string)                    {}
func (*stateMetrics) LeaseChanged(string, string)                 {}
func (*stateMetrics) PositionReset(string, string)                {}

func (m *stateMetrics) UnitState(source, unit, state string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.states[source+"|"+unit] = state
}

func (m *stateMetrics) Forget(source, unit string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.states, source+"|"+unit)
}

// snapshot is a copy of the reported states and their keys, sorted.
func (m *stateMetrics) snapshot() (map[string]string, []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := maps.Clone(m.states)
	return s, slices.Sorted(maps.Keys(s))
}
