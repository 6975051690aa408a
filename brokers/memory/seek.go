package memory

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/drover-dev/drover/brokers"
)

var _ brokers.Seeker = (*Stream)(nil)

// PositionAt is the start of partition at the first message stamped at or
// after t (brokers.Seeker): after the offset before it, the very beginning
// when it is offset 0, after the last offset when no message is that late.
// A message stamped at or after t that was trimmed is brokers.ErrPositionGone,
// as for Open at t.
func (s *Stream) PositionAt(ctx context.Context, partition string, t time.Time) (brokers.Start, error) {
	return s.positionAt(ctx, nil, partition, t)
}

func (s *Stream) positionAt(ctx context.Context, owner *StreamClient, partition string, t time.Time) (brokers.Start, error) {
	if err := s.enter(ctx, OpResolve); err != nil {
		return brokers.Start{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.clientPartitionLocked(OpResolve, owner, partition)
	if err != nil {
		return brokers.Start{}, err
	}
	next, err := p.firstAt(OpResolve, partition, t)
	if err != nil {
		return brokers.Start{}, err
	}
	if next == 0 {
		return brokers.Start{Mode: brokers.Earliest}, nil
	}
	return brokers.Start{After: strconv.FormatInt(next-1, 10)}, nil
}

// firstAt is the offset of the first message stamped at or after t, the
// end when there is none; brokers.ErrPositionGone when a trimmed message
// was stamped that late. Called with the stream's lock held.
func (p *partition) firstAt(op, partition string, t time.Time) (int64, error) {
	if trimmed := p.trimmedTime.time(); !trimmed.IsZero() && !trimmed.Before(t) {
		return 0, &brokers.Error{Op: op, Err: fmt.Errorf("partition %s at %s (a message stamped %s was trimmed): %w",
			partition, t.Format(time.RFC3339Nano), trimmed.Format(time.RFC3339Nano), brokers.ErrPositionGone)}
	}
	for i := range p.recs {
		if rec := &p.recs[i]; !rec.marker && !rec.msg.Time.Before(t) {
			return p.base + int64(i), nil
		}
	}
	return p.end(), nil
}
