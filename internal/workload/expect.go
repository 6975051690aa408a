package workload

import (
	"fmt"

	"github.com/drover-dev/drover/actors/decode"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/persistence"
)

// Sent is a message as produced, with the partition it went to. For a
// queue, give each message its own Partition (its id): a queue keeps no
// order.
type Sent struct {
	Partition string
	Msg       brokers.Message
}

// Expected is what a records-mode source must leave in the store after
// applying every message.
type Expected struct {
	// Docs are the documents of the keys that exist at the end, canonical
	// JSON (compare with persistence.JSONEqual).
	Docs map[string]string
	// Dead maps the index of each message decoding refuses to its reason.
	Dead map[int]string
}

// Expect works out what the store must hold after a records-mode source
// decoded with dc applied msgs: each partition's messages in the order
// given, the last operation per key winning. It fails when a key is
// written in two partitions, since the final document would then depend on
// the order the partitions were applied in.
func Expect(dc decode.Config, msgs []Sent) (Expected, error) {
	e := Expected{Docs: map[string]string{}, Dead: map[int]string{}}
	partOf := map[string]string{}
	for i, s := range msgs {
		op := dc.Record(s.Msg)
		switch op.Kind {
		case persistence.OpUpsert, persistence.OpDelete:
			if p, ok := partOf[op.Key]; ok && p != s.Partition {
				return e, fmt.Errorf("key %q is written in partitions %s and %s: its final document depends on delivery order", op.Key, p, s.Partition)
			}
			partOf[op.Key] = s.Partition
			if op.Kind == persistence.OpUpsert {
				e.Docs[op.Key] = string(op.Doc)
			} else {
				delete(e.Docs, op.Key)
			}
		case persistence.OpDeadLetter:
			e.Dead[i] = op.Reason
		default:
			return e, fmt.Errorf("message %d: decode gave a %v op", i, op.Kind)
		}
	}
	return e, nil
}
