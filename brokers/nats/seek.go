package nats

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/drover-dev/drover/brokers"
)

var _ brokers.Seeker = (*Stream)(nil)

// errNoMessageFound is JetStream's error code for a message get that
// matched nothing.
const errNoMessageFound = 10037

// PositionAt is the start of partition at the first message of its
// subject filter the stream stored at or after t (brokers.Seeker), by the
// server's message get by start time (nats-server ≥ 2.11): after the
// sequence before it, the very beginning when it is sequence 1, after the
// stream's last sequence (as of before the get, so that nothing stored
// meanwhile is skipped) when no message is that late.
func (s *Stream) PositionAt(ctx context.Context, partition string, t time.Time) (brokers.Start, error) {
	const op = "position at"
	info, err := s.checkedInfo(ctx, op)
	if err != nil {
		return brokers.Start{}, err
	}
	if !slices.Contains(s.partitions(info), partition) {
		return brokers.Start{}, &brokers.Error{Op: op, Err: fmt.Errorf("partition %q of stream %q: %w", partition, s.cfg.Stream, brokers.ErrUnknownPartition)}
	}
	last := info.State.LastSeq
	req, err := json.Marshal(struct {
		StartTime time.Time `json:"start_time"`
		NextFor   string    `json:"next_by_subj"`
	}{t.UTC(), partition})
	if err != nil {
		return brokers.Start{}, &brokers.Error{Op: op, Err: err}
	}
	octx, done := s.c.life.Op(ctx)
	defer done()
	rctx, cancel := context.WithTimeout(octx, s.cfg.Conn.RequestTimeout)
	defer cancel()
	msg, err := s.c.nc.RequestWithContext(rctx, "$JS.API.STREAM.MSG.GET."+s.cfg.Stream, req)
	if err != nil {
		return brokers.Start{}, s.c.life.Finish(ctx, op, fmt.Errorf("stream %q message at %s: %w", s.cfg.Stream, t.Format(time.RFC3339Nano), err))
	}
	var resp struct {
		Message *struct {
			Seq uint64 `json:"seq"`
		} `json:"message"`
		Error *struct {
			Code        int    `json:"code"`
			ErrCode     int    `json:"err_code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return brokers.Start{}, &brokers.Error{Op: op, Retryable: true, Err: fmt.Errorf("stream %q: message get answer: %w", s.cfg.Stream, err)}
	}
	seq := last + 1
	switch {
	case resp.Error != nil && resp.Error.ErrCode == errNoMessageFound:
	case resp.Error != nil:
		return brokers.Start{}, &brokers.Error{Op: op, Err: fmt.Errorf("stream %q message at %s: %s (code %d, error code %d)",
			s.cfg.Stream, t.Format(time.RFC3339Nano), resp.Error.Description, resp.Error.Code, resp.Error.ErrCode)}
	case resp.Message != nil:
		seq = resp.Message.Seq
	}
	if seq <= 1 {
		return brokers.Start{Mode: brokers.Earliest}, nil
	}
	return brokers.Start{After: strconv.FormatUint(seq-1, 10)}, nil
}
