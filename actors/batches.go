package actors

import (
	"context"
	"errors"
	"fmt"

	"github.com/drover-dev/drover/actors/decode"
	"github.com/drover-dev/drover/actors/quality"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/internal/mutate"
	"github.com/drover-dev/drover/persistence"
)

// The pure parts of a unit's fetch, apply and retry: no actor state, no
// I/O (table tests in batches_test.go).

// fetchBatching is what prepareFetch needs of a unit.
type fetchBatching struct {
	source, unit, table string
	lease               persistence.Lease
	queue               bool
	// position is the last applied position of a stream unit ("" before
	// the first): messages at or below it are re-reads, dropped.
	position string
	maxBytes int // batch_bytes
	decoder  decode.Config
	// handle, set for a source with a Handler, builds a batch's Handle
	// hook: the ops are then the raw messages and the batch has no table.
	handle func(b *persistence.Batch, byPos map[string]brokers.Message) func(context.Context, persistence.Tx, []persistence.Op) error
}

// prepareFetch decodes a fetch into batches; nil when there is nothing to
// write. A batch holds at most spec.BatchBytes bytes of ops (a single op
// larger than that is a batch of its own); the fetch's messages are split
// into as many batches as that takes, in order, each a stream batch with
// the checkpoint of its last message, the last one Finished when the fetch
// reached the end.
func prepareFetch(f fetchBatching, fetched brokers.Result) *pendingBatch {
	queue := f.queue
	pb := &pendingBatch{msgs: fetched.Messages, late: map[string]bool{}}
	if f.handle != nil {
		pb.indexMessages() // the handler gets each op's message
	}
	// Room for the ops up front: the first batch for the whole fetch, a
	// batch after a batch_bytes cut for as many as the one before it held
	// (or the rest of the fetch, when fewer).
	newBatch := func(room int) *persistence.Batch {
		return &persistence.Batch{Source: f.source, Unit: f.unit, Lease: f.lease, Table: f.table, Dedupe: queue,
			Ops: make([]persistence.Op, 0, room)}
	}
	b := newBatch(len(fetched.Messages))
	batches := []*persistence.Batch{b}
	size := 0
	for i, m := range fetched.Messages {
		if !queue && f.position != "" && brokers.ComparePositions(m.Position, f.position) <= 0 {
			continue // at or below the checkpoint: a re-read after a crash
		}
		var op persistence.Op
		if f.handle != nil {
			op = f.decoder.Raw(m)
		} else {
			op = f.decoder.Record(m)
		}
		n := op.Size()
		if len(b.Ops) > 0 && size+n > f.maxBytes && !mutate.On(mutate.NoBatchBytes) {
			b, size = newBatch(min(len(b.Ops), len(fetched.Messages)-i)), 0
			batches = append(batches, b)
		}
		size += n
		b.Ops = append(b.Ops, op)
		if !queue {
			b.Checkpoint = m.Position
		}
	}
	if fetched.End && !queue {
		b.Finished = true
		if b.Checkpoint == "" {
			b.Checkpoint = f.position
		}
	}
	if len(b.Ops) == 0 && !b.Finished {
		if queue && len(fetched.Messages) > 0 {
			pb.batch = b // nothing to write, but the messages need acks
			return pb
		}
		return nil
	}
	if f.handle != nil {
		for _, b := range batches {
			b.Table = ""
			b.Handle = f.handle(b, pb.byPos)
		}
	}
	pb.batch, pb.rest = batches[0], batches[1:]
	return pb
}

// indexMessages fills byPos with the fetch's messages.
func (pb *pendingBatch) indexMessages() {
	pb.byPos = make(map[string]brokers.Message, len(pb.msgs))
	for _, m := range pb.msgs {
		pb.byPos[m.Position] = m
	}
}

// message returns the fetched message of an op's position. The index is
// built on the first call: in records mode only a refused batch asks, so
// a fetch that commits builds none.
func (pb *pendingBatch) message(pos string) (brokers.Message, bool) {
	if pb.byPos == nil {
		pb.indexMessages()
	}
	m, ok := pb.byPos[pos]
	return m, ok
}

// committed reports whether checkpoint cp shows batch b committed.
func committed(cp persistence.Checkpoint, b *persistence.Batch) bool {
	if b.Finished && !cp.Finished {
		return false
	}
	return b.Checkpoint == "" || brokers.ComparePositions(brokers.Applied(cp.Position), b.Checkpoint) >= 0
}

// applyTally is what a committed batch did, for the tree, the metrics and
// the quality window.
type applyTally struct {
	applied      int64 // ops written (records, or messages a handler took)
	deadLettered int64 // dead letters written
	rejected     int64 // of those, the messages that failed decoding (not dead-lettered later by a handler or the store)
	duplicates   int   // distinct message ids the dedupe table had already (queues): not counted
	// sample observes the ops counted; nil when there were none.
	sample *quality.Stats
}

// tallyApply counts the ops of a committed batch. duplicates are the
// message ids the store refused as already applied; late the positions
// dead-lettered after decoding.
func tallyApply(ops []persistence.Op, duplicates []string, late map[string]bool, schema quality.Schema) applyTally {
	var t applyTally
	dup := make(map[string]bool, len(duplicates))
	for _, id := range duplicates {
		dup[id] = true
	}
	t.duplicates = len(dup)
	for _, op := range ops {
		if op.MessageID != "" && dup[op.MessageID] {
			continue
		}
		if t.sample == nil {
			t.sample = quality.New(schema)
		}
		t.sample.Observe(op)
		switch {
		case op.Kind != persistence.OpDeadLetter:
			t.applied++
		case late[op.Position]: // dead-lettered by a handler or the store
			t.deadLettered++
		default: // by decoding
			t.deadLettered++
			t.rejected++
		}
	}
	return t
}

// namedOp is a broker call's error named by its operation: a
// *brokers.Error names it already ("ack: broker not available"), anything
// else gets op in front.
func namedOp(op string, err error) error {
	var be *brokers.Error
	if errors.As(err, &be) {
		return err
	}
	return fmt.Errorf("%s: %w", op, err)
}

func opRange(ops []persistence.Op) string {
	if len(ops) == 0 {
		return ".."
	}
	return ops[0].Position + ".." + ops[len(ops)-1].Position
}
