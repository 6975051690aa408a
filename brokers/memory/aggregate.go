package memory

import (
	"fmt"

	"github.com/drover-dev/drover/brokers"
)

var _ brokers.SubPositioner = (*Stream)(nil)

// SubPositions is true (brokers.SubPositioner): an aggregate's user
// records are read at sub-positions.
func (s *Stream) SubPositions() bool { return true }

// ProduceAggregate appends msgs to partition as ONE record, the way a KPL
// producer aggregates user records into one Kinesis record: a reader
// returns them in order at sub-positions "<offset>/<index>"
// (brokers.SubPosition), at most max per Fetch, so that a batch and a
// checkpoint may end inside the aggregate. It returns their positions.
// Each keeps its own key and headers; their Time is the aggregate's.
func (s *Stream) ProduceAggregate(partition string, msgs ...brokers.Message) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.openPartitionLocked("produce", partition)
	if err != nil {
		return nil, err
	}
	if len(msgs) == 0 {
		return nil, fmt.Errorf("memory: an aggregate needs at least one message")
	}
	s.appendLocked(p, nil, []brokers.Message{{}})
	rec := &p.recs[len(p.recs)-1]
	positions := make([]string, len(msgs))
	rec.subs = make([]brokers.Message, len(msgs))
	for i, m := range msgs {
		m = copyMessage(m)
		m.Position, m.ID, m.Deliveries, m.Handle, m.Time = brokers.SubPosition(rec.msg.Position, i), "", 0, nil, rec.msg.Time
		rec.subs[i] = m
		positions[i] = m.Position
	}
	p.notify()
	return positions, nil
}
