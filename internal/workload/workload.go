package workload

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/drover-dev/drover/brokers"
)

// Workload makes a seeded mix of messages of every kind drover handles:
// JSON upserts (new keys and updates), Kafka tombstones, `_deleted`
// markers, Debezium change events with and without the payload wrapper,
// and bad messages (not JSON, not an object, no key, too big).
//
// Messages are keyed by the "id" field (use KeyField "id"); tombstones
// carry the key as message key.
type Workload struct {
	rng *rand.Rand
	// Keys is how many distinct ids upserts pick from (default 200).
	Keys int
	// BadRate, DeleteRate are fractions of messages (defaults 0.05, 0.1).
	BadRate, DeleteRate float64
	// MaxBytes is the size above which the source dead-letters; an
	// oversize message is made a little bigger (default 1 MiB).
	MaxBytes int
	// Tombstones enables Kafka-style tombstones (streams only).
	Tombstones bool
	seq        int
}

// New returns a workload seeded with seed.
func New(seed uint64) *Workload {
	return &Workload{rng: rand.New(rand.NewPCG(seed, seed^0xdeadbeef)), Keys: 200, BadRate: 0.05, DeleteRate: 0.1, MaxBytes: 1 << 20, Tombstones: true}
}

// Kind says what a workload message is meant to become.
type Kind string

const (
	KindUpsert  Kind = "upsert"
	KindDelete  Kind = "delete"
	KindBad     Kind = "bad"
	KindUnkeyed Kind = "no-key"
)

// Next returns the next message and what it should become.
func (w *Workload) Next() (brokers.Message, Kind) {
	w.seq++
	r := w.rng.Float64()
	id := strconv.Itoa(w.rng.IntN(w.Keys))
	switch {
	case r < w.BadRate:
		return w.bad()
	case r < w.BadRate+w.DeleteRate:
		return w.delete(id), KindDelete
	default:
		return w.upsert(id), KindUpsert
	}
}

// Batch returns n messages.
func (w *Workload) Batch(n int) []brokers.Message {
	out := make([]brokers.Message, n)
	for i := range out {
		out[i], _ = w.Next()
	}
	return out
}

func (w *Workload) upsert(id string) brokers.Message {
	name := fmt.Sprintf("item-%d", w.seq)
	switch w.rng.IntN(4) {
	case 0: // Debezium create/update with payload wrapper
		op := []string{"c", "u", "r"}[w.rng.IntN(3)]
		return msg(id, fmt.Sprintf(`{"schema":{},"payload":{"op":%q,"before":null,"after":{"id":%s,"name":%q,"seq":%d}}}`, op, id, name, w.seq))
	case 1: // Debezium without wrapper
		return msg(id, fmt.Sprintf(`{"op":"u","before":{"id":%s},"after":{"id":%s,"name":%q,"seq":%d}}`, id, id, name, w.seq))
	default:
		return msg(id, fmt.Sprintf(`{"id":%s,"name":%q,"seq":%d,"price":%d.%02d,"tags":["a","b"],"ok":%v}`, id, name, w.seq,
			w.rng.IntN(100), w.rng.IntN(100), w.rng.IntN(2) == 0))
	}
}

func (w *Workload) delete(id string) brokers.Message {
	switch n := w.rng.IntN(3); {
	case n == 0 && w.Tombstones:
		return brokers.Message{Key: []byte(id), Tombstone: true}
	case n == 1:
		return msg(id, fmt.Sprintf(`{"payload":{"op":"d","before":{"id":%s,"name":"gone"},"after":null}}`, id))
	default:
		return msg(id, fmt.Sprintf(`{"id":%s,"_deleted":true}`, id))
	}
}

func (w *Workload) bad() (brokers.Message, Kind) {
	switch w.rng.IntN(5) {
	case 0:
		return msg("x", `{"id": 1, "name": "broken`), KindBad
	case 1:
		return msg("x", `[1,2,3]`), KindBad
	case 2:
		return msg("x", `not json at all`), KindBad
	case 3:
		return msg("", fmt.Sprintf(`{"name":"no id %d"}`, w.seq)), KindUnkeyed
	default:
		return msg("x", `{"id":1,"blob":"`+strings.Repeat("z", w.MaxBytes)+`"}`), KindBad
	}
}

func msg(key, body string) brokers.Message {
	m := brokers.Message{Value: []byte(body)}
	if key != "" {
		m.Key = []byte(key)
	}
	return m
}

// PartitionOf spreads keys over n partitions the way a keyed producer
// would, so that every key lives in one partition (its order is kept).
func PartitionOf(m brokers.Message, n int) string {
	var h uint32 = 2166136261
	for _, b := range m.Key {
		h = (h ^ uint32(b)) * 16777619
	}
	return strconv.Itoa(int(h % uint32(n)))
}
