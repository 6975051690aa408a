package nats

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/brokers"
)

// converted is one delivered message in drover's form with the metadata
// the adapters need.
type converted struct {
	msg     brokers.Message
	seq     uint64 // stream sequence
	pending uint64 // messages of the consumer not yet delivered after this one
}

// convert turns a delivered JetStream message into a brokers.Message.
// Queue messages get ID "<stream>:<sequence>" (= Position), Deliveries and
// the jetstream.Msg as Handle; stream messages get Position "<sequence>".
func convert(m jetstream.Msg, key KeyConfig, queue bool) (converted, error) {
	meta, err := m.Metadata()
	if err != nil {
		return converted{}, fmt.Errorf("message on %q: %w", m.Subject(), err)
	}
	seq := strconv.FormatUint(meta.Sequence.Stream, 10)
	out := brokers.Message{
		Value:   m.Data(),
		Headers: headers(m),
		Time:    meta.Timestamp,
	}
	out.Key = messageKey(m, key)
	if queue {
		out.ID = meta.Stream + ":" + seq
		out.Position = out.ID
		out.Deliveries = int(meta.NumDelivered)
		out.Handle = m
	} else {
		out.Position = seq
	}
	return converted{msg: out, seq: meta.Sequence.Stream, pending: meta.NumPending}, nil
}

// headers returns the message's headers sorted by name, the values of one
// name in the order they came. nats.go decodes headers into a map, so the
// order of different names as the producer wrote them is not known.
func headers(m jetstream.Msg) []brokers.Header {
	h := m.Headers()
	if len(h) == 0 {
		return nil
	}
	names := make([]string, 0, len(h))
	n := 0
	for k, vs := range h {
		names = append(names, k)
		n += len(vs)
	}
	slices.Sort(names)
	out := make([]brokers.Header, 0, n)
	for _, k := range names {
		for _, v := range h[k] {
			out = append(out, brokers.Header{Key: k, Value: []byte(v)})
		}
	}
	return out
}

func messageKey(m jetstream.Msg, key KeyConfig) []byte {
	if vs := m.Headers()[key.KeyHeader]; len(vs) > 0 {
		return []byte(vs[0])
	}
	if key.KeyFromSubject {
		s := m.Subject()
		if i := strings.LastIndexByte(s, '.'); i >= 0 {
			s = s[i+1:]
		}
		if s != "" {
			return []byte(s)
		}
	}
	return nil
}
