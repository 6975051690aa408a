package kafka

import (
	"context"
	"net"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/drover-dev/drover/brokers"
)

// NewWithDialer is New with every client of the stream dialling through
// dial, so that a test counts the connections the stream opens.
func NewWithDialer(cfg Config, dial func(ctx context.Context, network, host string) (net.Conn, error)) (*Stream, error) {
	return newStream(cfg, kgo.Dialer(dial))
}

// BufferStats is what a reader's buffer holds and has done.
type BufferStats struct {
	Buffered int  // records held now
	Peak     int  // the most records ever held
	Pauses   int  // times the partition was paused in the client
	Paused   bool // paused now
}

// Buffer returns the stats of r's buffer; r must be a *Reader.
func Buffer(r brokers.Reader) BufferStats {
	b := r.(*Reader).buf
	b.mu.Lock()
	defer b.mu.Unlock()
	return BufferStats{Buffered: b.records, Peak: b.peak, Pauses: b.pauses, Paused: b.paused}
}

// Clients is how many shared clients s has open.
func Clients(s *Stream) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.consumers)
}
