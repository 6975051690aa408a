package kafka

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Callers that arrive while a metadata request runs share the next one,
// never the running one: n units opening at once cost two requests, and
// every answer comes from a request that started after its call.
func TestMetaQueueCoalesces(t *testing.T) {
	var q metaQueue
	var runs atomic.Int32
	release := make(chan struct{})
	started := make(chan int32, 10)
	run := func() ([]int32, [16]byte, error) {
		n := runs.Add(1)
		started <- n
		<-release
		return []int32{n}, [16]byte{}, nil
	}
	first := q.join(run)
	if n := <-started; n != 1 {
		t.Fatalf("first request is run %d", n)
	}
	var later []*metaCall
	for range 10 {
		later = append(later, q.join(run))
	}
	for _, c := range later {
		if c != later[0] || c == first {
			t.Fatal("callers during a running request do not share the next one")
		}
	}
	release <- struct{}{}
	<-first.done
	if first.ids[0] != 1 {
		t.Fatalf("first answer %v", first.ids)
	}
	if n := <-started; n != 2 {
		t.Fatalf("second request is run %d", n)
	}
	fresh := q.join(run) // joins while the second runs: gets a third
	close(release)
	<-later[0].done
	<-fresh.done
	if later[0].ids[0] != 2 || fresh.ids[0] != 3 || runs.Load() != 3 {
		t.Fatalf("answers %v and %v after %d runs, want 2 and 3 after 3", later[0].ids, fresh.ids, runs.Load())
	}
	q.close()
	if c := q.join(run); !errors.Is(c.err, kgo.ErrClientClosed) {
		t.Fatalf("join after close: %v", c.err)
	}
}
