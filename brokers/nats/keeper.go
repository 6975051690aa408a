package nats

import (
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// keeper sends in-progress acks for messages whose extension outlasts one
// AckWait. It owns one goroutine, started by startKeeper and ended by stop.
type keeper struct {
	c     *conn
	every time.Duration
	log   *slog.Logger

	mu    sync.Mutex
	until map[jetstream.Msg]time.Time // last in-progress due by then

	quit chan struct{}
	done chan struct{}
}

func startKeeper(c *conn, every time.Duration, log *slog.Logger) *keeper {
	k := &keeper{
		c:     c,
		every: max(every, time.Millisecond),
		log:   log,
		until: make(map[jetstream.Msg]time.Time),
		quit:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	go k.run()
	return k
}

func (k *keeper) add(msgs []jetstream.Msg, until time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, m := range msgs {
		if until.After(k.until[m]) {
			k.until[m] = until
		}
	}
}

func (k *keeper) remove(m jetstream.Msg) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.until, m)
}

func (k *keeper) run() {
	defer close(k.done)
	t := time.NewTicker(k.every)
	defer t.Stop()
	for {
		select {
		case <-k.quit:
			return
		case now := <-t.C:
			k.tick(now)
		}
	}
}

// tick sends an in-progress ack for every message still kept. A message
// whose until has come gets its last one now and is dropped: the server
// then holds it for one more AckWait, to until+AckWait or later.
func (k *keeper) tick(now time.Time) {
	k.mu.Lock()
	var due []jetstream.Msg
	for m, until := range k.until {
		due = append(due, m)
		if !now.Before(until) {
			delete(k.until, m)
		}
	}
	k.mu.Unlock()
	if len(due) == 0 || k.c.ready("extend") != nil {
		return
	}
	for _, m := range due {
		if err := m.InProgress(); err != nil {
			k.log.Warn("nats: in-progress ack failed; the message may come back before its extension ends", "err", err)
			return
		}
	}
}

func (k *keeper) stop() {
	close(k.quit)
	<-k.done
}
