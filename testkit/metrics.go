package testkit

import (
	"maps"
	"slices"
	"sync"

	"github.com/drover-dev/drover/actors"
)

// stateMetrics is a node's actors.Metrics in the simulator: it keeps what
// the runtime reported of each unit's state (UnitState, Forget), the part
// of the metrics an invariant checks against the tree. The counters are
// not kept.
type stateMetrics struct {
	mu     sync.Mutex
	states map[unitKey]string // the state last reported
	ver    uint64             // counts the changes of states
}

// unitKey is a unit of a source (the tree invariant looks units up by it
// at every virtual instant: no string to build).
type unitKey struct{ source, unit string }

func newStateMetrics() *stateMetrics { return &stateMetrics{states: map[unitKey]string{}} }

func (*stateMetrics) Received(string, string, int64)              {}
func (*stateMetrics) Lag(string, string, actors.Lag)              {}
func (*stateMetrics) Applied(string, string, int64, int64, int64) {}
func (*stateMetrics) Acked(string, string, int64)                 {}
func (*stateMetrics) Restarted(string, string)                    {}
func (*stateMetrics) LeaseChanged(string, string)                 {}
func (*stateMetrics) PositionReset(string, string)                {}

func (m *stateMetrics) UnitState(source, unit, state string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := unitKey{source, unit}
	if was, ok := m.states[k]; !ok || was != state {
		m.states[k] = state
		m.ver++
	}
}

func (m *stateMetrics) Forget(source, unit string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.states[unitKey{source, unit}]; ok {
		delete(m.states, unitKey{source, unit})
		m.ver++
	}
}

// snapshot is a copy of the reported states by "source|unit", and those
// keys, sorted.
func (m *stateMetrics) snapshot() (map[string]string, []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := make(map[string]string, len(m.states))
	for k, v := range m.states {
		s[k.source+"|"+k.unit] = v
	}
	return s, slices.Sorted(maps.Keys(s))
}

// version counts the changes of the reported states.
func (m *stateMetrics) version() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ver
}
