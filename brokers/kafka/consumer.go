package kafka

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// fetchMaxWait is how long a fetch request waits at the broker for data.
// A partition added or resumed while a fetch to its broker is in flight
// is fetched only with that broker's next request, so a short wait keeps
// a new or drained reader from waiting on its idle neighbours; the cost is
// a few empty fetches a second per broker, not per partition.
const fetchMaxWait = 250 * time.Millisecond

// defaultBufferLimit is how many records a partition's buffer takes before
// its reader's first Fetch names its batch size: one, so that the
// partition is paused after its first fetch response, as a client of its
// own held one response until it was polled. A reader opened well before
// it first fetches (or a partition trimmed meanwhile) is then at most one
// response ahead of its unit.
const defaultBufferLimit = 1

// consumer is one franz-go client shared by the readers of a Stream, at
// most one reader per partition, with the goroutine that polls it and
// routes what it fetches into each reader's partBuf. A Stream has one, and
// another only while two readers of one partition are open at once.
//
// Lock order: Stream.mu, consumer.mu, partBuf.mu.
type consumer struct {
	s    *Stream
	cl   *kgo.Client
	done chan struct{} // closed when the poll loop has returned

	mu    sync.Mutex
	cond  *sync.Cond // on mu: a poll finished, or the loop returned
	parts map[int32]*partBuf
	// leaving are partitions whose reader is closing: the client may
	// still hold their records, so no reader of them opens here until
	// the close is done.
	leaving    map[int32]struct{}
	started    uint64             // polls begun
	finished   uint64             // polls whose fetches are routed
	cancelPoll context.CancelFunc // ends the poll in progress
	stopped    bool               // the loop has returned
}

// newConsumer starts a client with the stream's fetch settings, consuming
// nothing yet, and its poll loop.
func newConsumer(s *Stream) (*consumer, error) {
	opts := append(slices.Clip(s.base),
		// Partitions are consumed directly, added and removed as readers
		// open and close; the client never resets an offset itself.
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
		kgo.FetchMaxBytes(s.cfg.FetchMaxBytes),
		kgo.FetchMaxPartitionBytes(s.cfg.FetchMaxPartitionBytes),
		kgo.FetchMaxWait(fetchMaxWait),
		// Control records (transaction markers) are handed to the reader,
		// which never returns them but steps past them: Lag and Committed
		// need to know where the next fetch starts.
		kgo.KeepControlRecords(),
	)
	if !s.cfg.readUncommitted() {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	c := &consumer{s: s, cl: cl, done: make(chan struct{}), parts: make(map[int32]*partBuf), leaving: make(map[int32]struct{})}
	c.cond = sync.NewCond(&c.mu)
	go c.loop()
	return c, nil
}

// busy reports whether partition p cannot be added here now. Called with
// c.s.mu held.
func (c *consumer) busy(p int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, open := c.parts[p]
	_, leaving := c.leaving[p]
	return open || leaving || c.stopped
}

// empty reports whether no reader uses c. Called with c.s.mu held.
func (c *consumer) empty() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.parts) == 0 && len(c.leaving) == 0
}

// add starts consuming partition p at offset for a new reader's buffer.
// The buffer is registered before the client learns of the partition, so
// that the loop routes its first records. Called with c.s.mu held.
func (c *consumer) add(p int32, offset kgo.Offset) *partBuf {
	pb := &partBuf{c: c, p: p, end: -1, limit: defaultBufferLimit, notify: make(chan struct{}, 1)}
	c.mu.Lock()
	c.parts[p] = pb
	c.mu.Unlock()
	c.cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{c.s.cfg.Topic: {p: offset}})
	return pb
}

// remove stops consuming pb's partition and returns once nothing the
// client fetched for it can be routed any more: the client drops what it
// buffered when the partition is removed, and the barrier waits for the
// fetches the loop took before that. A later reader of the partition on
// c therefore never sees the old reader's records.
func (c *consumer) remove(pb *partBuf) {
	c.mu.Lock()
	if c.parts[pb.p] != pb {
		c.mu.Unlock()
		return
	}
	delete(c.parts, pb.p)
	c.leaving[pb.p] = struct{}{}
	c.mu.Unlock()

	c.cl.RemoveConsumePartitions(map[string][]int32{c.s.cfg.Topic: {pb.p}})
	// Resuming a removed partition is harmless; leaving it paused would
	// stop a later reader of it on this client from being fetched.
	c.cl.ResumeFetchPartitions(map[string][]int32{c.s.cfg.Topic: {pb.p}})

	c.mu.Lock()
	defer c.mu.Unlock()
	for target := c.started; c.finished < target && !c.stopped; {
		if c.cancelPoll != nil {
			c.cancelPoll() // a poll waiting for data holds nothing of pb's
		}
		c.cond.Wait()
	}
	delete(c.leaving, pb.p)
}

// close closes the client and waits for the poll loop. The readers'
// buffers are woken by their own close.
func (c *consumer) close() {
	c.cl.Close()
	<-c.done
}

// loop polls the client until it closes, routing every fetch into the
// buffers of the readers it is for.
func (c *consumer) loop() {
	defer close(c.done)
	for {
		ctx, cancel := context.WithCancel(context.Background())
		c.mu.Lock()
		c.started++
		c.cancelPoll = cancel
		c.mu.Unlock()
		fetches := c.cl.PollRecords(ctx, 0)
		cancel()
		if !c.route(fetches) {
			return
		}
	}
}

// route hands each partition's records and errors to its buffer, and an
// error about the whole topic, or no topic (a fetch response too large),
// to every buffer. It returns false when the client is closed. It counts
// the poll finished and calls the wake-ups due, after letting go of c.mu.
func (c *consumer) route(fetches kgo.Fetches) (open bool) {
	var wakes []func()
	open = true
	topic := c.s.cfg.Topic
	uncommitted := c.s.cfg.readUncommitted()
	c.mu.Lock()
	for _, f := range fetches {
		for _, t := range f.Topics {
			for i := range t.Partitions {
				fp := &t.Partitions[i]
				switch {
				case errors.Is(fp.Err, kgo.ErrClientClosed):
					open = false
				case fp.Partition < 0 && (errors.Is(fp.Err, context.Canceled) || errors.Is(fp.Err, context.DeadlineExceeded)):
					// the loop's own poll ended (remove's barrier)
				case t.Topic == topic && fp.Partition >= 0:
					if pb := c.parts[fp.Partition]; pb != nil {
						end := fp.LastStableOffset
						if uncommitted {
							end = fp.HighWatermark
						}
						wakes = pb.push(fp.Records, fp.Err, end, wakes)
					}
				case fp.Err != nil && (t.Topic == topic || t.Topic == ""):
					for _, pb := range c.parts {
						wakes = pb.push(nil, fp.Err, -1, wakes)
					}
				}
			}
		}
	}
	c.finished++
	if !open {
		c.stopped = true
	}
	c.cancelPoll = nil
	c.cond.Broadcast()
	c.mu.Unlock()
	for _, f := range wakes {
		f()
	}
	return open
}
