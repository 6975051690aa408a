package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// listing is one kind of ListOffsets question about a partition.
type listing struct {
	isolation int8  // 1: read_committed (the last stable offset)
	timestamp int64 // -2 the log start, -1 the end, else a Unix millisecond
}

var (
	startListing = listing{timestamp: -2}
	hwmListing   = listing{timestamp: -1}
	lsoListing   = listing{isolation: 1, timestamp: -1}
)

// endLister lists where a reader that starts at the end starts: the last
// stable offset when read_committed, the high watermark otherwise.
func (s *Stream) endLister() listing {
	if s.cfg.readUncommitted() {
		return hwmListing
	}
	return lsoListing
}

// listOne asks partition p's leader for one offset. The request names
// that partition only: kadm's listings name every partition of the topic,
// so that a node opening each of n partitions would list n² offsets.
// A timestamp with no record at or after it answers the high watermark.
func (s *Stream) listOne(ctx context.Context, op string, p int32, l listing) (int64, error) {
	rctx, cancel := s.requestCtx(ctx)
	defer cancel()
	off, err := s.listOffset(rctx, p, l)
	if err == nil && l.timestamp >= 0 && off == -1 {
		off, err = s.listOffset(rctx, p, hwmListing)
	}
	if err != nil {
		return 0, translate(ctx, op, fmt.Errorf("partition %d: %w", p, err))
	}
	return off, nil
}

func (s *Stream) listOffset(ctx context.Context, p int32, l listing) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.IsolationLevel = l.isolation
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = s.cfg.Topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition = p
	rp.Timestamp = l.timestamp
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	for _, shard := range s.admin.RequestSharded(ctx, req) {
		if shard.Err != nil {
			return 0, shard.Err
		}
		for _, t := range shard.Resp.(*kmsg.ListOffsetsResponse).Topics {
			for _, rp := range t.Partitions {
				if t.Topic != s.cfg.Topic || rp.Partition != p {
					continue
				}
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					return 0, err
				}
				return rp.Offset, nil
			}
		}
	}
	return 0, errors.New("offsets not listed") // translated as retryable
}

// offsetAt returns the offset of partition p's first record stamped at or
// after t, or the end when there is none.
func (s *Stream) offsetAt(ctx context.Context, op string, p int32, t time.Time) (int64, error) {
	return s.listOne(ctx, op, p, listing{timestamp: max(t.UnixMilli(), 0)})
}

// bounds returns partition p's log start offset and high watermark.
func (s *Stream) bounds(ctx context.Context, op string, p int32) (lo, hi int64, err error) {
	if lo, err = s.listOne(ctx, op, p, startListing); err != nil {
		return 0, 0, err
	}
	if hi, err = s.listOne(ctx, op, p, hwmListing); err != nil {
		return 0, 0, err
	}
	return lo, hi, nil
}
