package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/drover-dev/drover/actors/decode"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/persistence"
)

// MinPayload is the smallest Options.Payload: the order without padding.
const MinPayload = 96

// workload is the preloaded messages: message i has key i mod keys, goes
// to partition key mod partitions (so one key's messages keep their order)
// and carries seq i; each is a JSON order padded to payload bytes.
type workload struct {
	partitions, messages, keys, payload int
	// byPart[p] are the message numbers of partition p in offset order.
	byPart [][]int
}

func newWorkload(partitions, messages, keys, payload int) *workload {
	w := &workload{partitions: partitions, messages: messages, keys: keys, payload: payload, byPart: make([][]int, partitions)}
	for i := range messages {
		p := w.partition(i)
		w.byPart[p] = append(w.byPart[p], i)
	}
	return w
}

func (w *workload) key(i int) int       { return i % w.keys }
func (w *workload) partition(i int) int { return w.key(i) % w.partitions }

// value is message i's body:
//
//	{"id":K,"seq":I,"customer":"customer-%06d","status":"paid","total":%d.%02d,"currency":"EUR","pad":"xx…"}
//
// padded to the payload size. It is built with appends, not fmt: the
// latency figure's producer makes one per message in the bench's own
// process, beside the node it measures (fmt.Appendf took a sixth of a core
// at 40k msg/s).
func (w *workload) value(i int) []byte {
	k := w.key(i)
	b := make([]byte, 0, max(w.payload, 128))
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, int64(k), 10)
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, int64(i), 10)
	b = append(b, `,"customer":"customer-`...)
	b = appendPadded(b, k%50_000, 6)
	b = append(b, `","status":"paid","total":`...)
	b = strconv.AppendInt(b, int64(10+i%990), 10)
	b = append(b, '.')
	b = appendPadded(b, i%100, 2)
	b = append(b, `,"currency":"EUR","pad":"`...)
	for pad := w.payload - len(b) - 2; pad > 0; pad-- {
		b = append(b, 'x')
	}
	return append(b, `"}`...)
}

// appendPadded appends n (not negative) in decimal, zero-padded to width.
func appendPadded(b []byte, n, width int) []byte {
	var d [20]byte
	s := strconv.AppendInt(d[:0], int64(n), 10)
	for range width - len(s) {
		b = append(b, '0')
	}
	return append(b, s...)
}

// record is message i as produced.
func (w *workload) record(topic string, i int) *kgo.Record {
	return &kgo.Record{Topic: topic, Partition: int32(w.partition(i)), Key: []byte(strconv.Itoa(w.key(i))), Value: w.value(i)}
}

// ends are the offsets of the last message of each partition, -1 for an
// empty one.
func (w *workload) ends() []int64 {
	out := make([]int64, w.partitions)
	for p, ms := range w.byPart {
		out[p] = int64(len(ms)) - 1
	}
	return out
}

// expected is the seq of the last message of each key.
func (w *workload) expected() map[string]int {
	out := make(map[string]int, min(w.keys, w.messages))
	for i := range w.messages {
		out[strconv.Itoa(w.key(i))] = i
	}
	return out
}

// preload produces every message to topic, partition by partition in
// offset order, and waits for all of them.
func (w *workload) preload(ctx context.Context, addr, topic string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(100_000))
	if err != nil {
		return fmt.Errorf("producer: %w", err)
	}
	defer cl.Close()
	const chunk = 10_000
	recs := make([]*kgo.Record, 0, chunk)
	flush := func() error {
		err := cl.ProduceSync(ctx, recs...).FirstErr()
		recs = recs[:0]
		return err
	}
	for i := range w.messages {
		recs = append(recs, w.record(topic, i))
		if len(recs) == chunk {
			if err := flush(); err != nil {
				return fmt.Errorf("preload %s: %w", topic, err)
			}
		}
	}
	if err := flush(); err != nil {
		return fmt.Errorf("preload %s: %w", topic, err)
	}
	return nil
}

// sqlBatch is one folded batch of a partition, as the ceiling and the loop
// write it.
type sqlBatch struct {
	unit       string
	keys       []string
	docs       []string
	positions  []string
	checkpoint string
}

// decoded cuts each partition into batches of batch messages, decodes them
// as drover does (actors/decode, key field "id") and folds them. Batches
// are listed round robin over the partitions, as concurrent units would
// reach the store.
func (w *workload) decoded(source string, batch int) ([]*sqlBatch, error) {
	dec := decode.Config{KeyField: "id"}
	per := make([][]*sqlBatch, w.partitions)
	for p, ms := range w.byPart {
		for from := 0; from < len(ms); from += batch {
			to := min(from+batch, len(ms))
			ops := make([]persistence.Op, 0, to-from)
			for off := from; off < to; off++ {
				i := ms[off]
				op := dec.Record(brokers.Message{Position: strconv.Itoa(off), Key: []byte(strconv.Itoa(w.key(i))), Value: w.value(i)})
				if op.Kind != persistence.OpUpsert {
					return nil, fmt.Errorf("message %d decodes to %v (%s), not an upsert", i, op.Kind, op.Reason)
				}
				ops = append(ops, op)
			}
			per[p] = append(per[p], fold(fmt.Sprintf("%s/%d", source, p), ops))
		}
	}
	var out []*sqlBatch
	for round := 0; ; round++ {
		added := false
		for p := range per {
			if round < len(per[p]) {
				out = append(out, per[p][round])
				added = true
			}
		}
		if !added {
			return out, nil
		}
	}
}

// fold is a batch of ops, last op per key winning, keys sorted as drover
// sends them; its checkpoint is the last op's position.
func fold(unit string, ops []persistence.Op) *sqlBatch {
	b := &sqlBatch{unit: unit, checkpoint: ops[len(ops)-1].Position}
	recs := persistence.Fold(ops)
	slices.SortStableFunc(recs, func(x, y persistence.Op) int { return strings.Compare(x.Key, y.Key) })
	for _, op := range recs {
		b.keys = append(b.keys, op.Key)
		b.docs = append(b.docs, string(op.Doc))
		b.positions = append(b.positions, op.Position)
	}
	return b
}

// plainDecode is what a hand-written consumer does with a body: parse it
// (numbers kept as written), take "id" as the key, and marshal it again
// (encoding/json sorts the members of a map).
func plainDecode(value []byte) (key string, doc []byte, err error) {
	d := json.NewDecoder(bytes.NewReader(value))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return "", nil, err
	}
	switch id := m["id"].(type) {
	case json.Number:
		key = id.String()
	case string:
		key = id
	default:
		return "", nil, fmt.Errorf("no id")
	}
	doc, err = json.Marshal(m)
	return key, doc, err
}
