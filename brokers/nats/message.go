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
	err     error // the message has no JetStream metadata
	msg     brokers.Message
	seq     uint64 // stream sequence
	pending uint64 // messages of the consumer not yet delivered after this one
	stream  string // the stream's name
	stamp   int64  // when the stream stored the message, Unix ns
}

// convert turns a delivered JetStream message into a brokers.Message.
// Queue messages get Deliveries and the jetstream.Msg as Handle, and the
// queue then names them (Queue.name: ID = Position =
// "<stream>:<stream created>:<sequence>"); stream messages get Position
// "<sequence>".
func convert(m jetstream.Msg, key KeyConfig, queue bool) converted {
	meta, err := m.Metadata()
	if err != nil {
		return converted{err: fmt.Errorf("message on %q: %w", m.Subject(), err)}
	}
	out := brokers.Message{Value: m.Data(), Time: meta.Timestamp}
	out.Headers, out.Key = headers(m, key)
	if queue {
		out.Deliveries = int(meta.NumDelivered)
		out.Handle = m
	} else {
		out.Position = strconv.FormatUint(meta.Sequence.Stream, 10)
	}
	return converted{msg: out, seq: meta.Sequence.Stream, pending: meta.NumPending, stream: meta.Stream, stamp: meta.Timestamp.UnixNano()}
}

// headers returns the message's headers sorted by name, the values of one
// name in the order they came, and the key: the first value of the key
// header, else (with KeyFromSubject) the subject's last token. nats.go
// decodes headers into a map, so the order of different names as the
// producer wrote them is not known.
func headers(m jetstream.Msg, key KeyConfig) ([]brokers.Header, []byte) {
	h := m.Headers()
	var names []string
	size, n := 0, 0
	for name, vs := range h {
		names = append(names, name)
		n += len(vs)
		for _, v := range vs {
			size += len(v)
		}
	}
	keyVals := h[key.KeyHeader]
	if len(keyVals) > 0 {
		size += len(keyVals[0])
	}
	// One buffer holds every value and the key; each slice is capped so
	// that appending to one cannot write into the next.
	buf := make([]byte, 0, size)
	take := func(v string) []byte {
		from := len(buf)
		buf = append(buf, v...)
		return buf[from:len(buf):len(buf)]
	}
	var out []brokers.Header
	if n > 0 {
		if len(names) > 1 {
			slices.Sort(names)
		}
		out = make([]brokers.Header, 0, n)
		for _, name := range names {
			for _, v := range h[name] {
				out = append(out, brokers.Header{Key: name, Value: take(v)})
			}
		}
	}
	if len(keyVals) > 0 {
		return out, take(keyVals[0])
	}
	if key.KeyFromSubject {
		s := m.Subject()
		if i := strings.LastIndexByte(s, '.'); i >= 0 {
			s = s[i+1:]
		}
		if s != "" {
			return out, []byte(s)
		}
	}
	return out, nil
}
