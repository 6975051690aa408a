package kafka

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// metaQueue coalesces a stream's metadata requests. A caller joins the
// next request to start, never one already in flight, so that its answer
// is as fresh as the call (a partition created before the call is listed,
// a broker down at the call fails it), while n units opening at once cost
// about two requests, not n: each names every partition of the topic, so n
// of them would cost n² partition entries. One goroutine runs the
// requests, one after another, while callers wait; Stream.Close waits for
// it.
type metaQueue struct {
	mu      sync.Mutex
	next    *metaCall // gathering callers, to start when the running one ends
	running bool
	closed  bool // no request starts any more
	wg      sync.WaitGroup
}

// metaCall is one metadata request and its answer, read by every caller
// that joined it once done is closed. ids is shared: callers do not
// modify it.
type metaCall struct {
	done    chan struct{}
	ids     []int32
	topicID [16]byte
	err     error
}

// join returns the request that starts next, starting it now when none
// runs.
func (q *metaQueue) join(run func() ([]int32, [16]byte, error)) *metaCall {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		call := &metaCall{done: make(chan struct{}), err: kgo.ErrClientClosed}
		close(call.done)
		return call
	}
	if q.next == nil {
		q.next = &metaCall{done: make(chan struct{})}
	}
	call := q.next
	if !q.running {
		q.running = true
		q.wg.Add(1)
		go q.run(run)
	}
	return call
}

// run runs the gathered requests until no caller waits.
func (q *metaQueue) run(run func() ([]int32, [16]byte, error)) {
	defer q.wg.Done()
	for {
		q.mu.Lock()
		call := q.next
		q.next = nil
		if call == nil {
			q.running = false
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		call.ids, call.topicID, call.err = run()
		close(call.done)
	}
}

// close starts no more requests and returns when none runs. The stream's
// lifetime has ended, so a running one ends at once.
func (q *metaQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.wg.Wait()
}
