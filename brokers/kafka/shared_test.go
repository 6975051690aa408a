package kafka_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/brokertest"
	"github.com/drover-dev/drover/brokers/kafka"
)

// waitFor polls cond until it holds, failing the test after 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 20 s", what)
		}
		<-tick.C
	}
}

// produceTo writes values to partition p of the test topic, one record
// batch per ProduceSync call of perBatch records.
func produceTo(t *testing.T, addr string, p int32, n, perBatch int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RetryTimeout(5*time.Second), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := 0; i < n; i += perBatch {
		var recs []*kgo.Record
		for j := i; j < min(n, i+perBatch); j++ {
			recs = append(recs, &kgo.Record{Topic: testTopic, Partition: p, Value: []byte("m-" + strconv.Itoa(j))})
		}
		if err := cl.ProduceSync(brokertest.Context(t, 10*time.Second), recs...).FirstErr(); err != nil {
			t.Fatalf("produce to %d: %v", p, err)
		}
	}
}

// The readers of one stream share one client: the connections the stream
// opens do not grow with the partitions it reads (issue 12: 1,000
// partitions used to be 1,000 clients and some 3,000 connections).
func TestConnectionsDoNotGrowWithPartitions(t *testing.T) {
	const brokerCount = 3
	c, err := kfake.NewCluster(kfake.NumBrokers(brokerCount), kfake.SeedTopics(64, testTopic))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addrs := c.ListenAddrs()
	for p := range int32(64) {
		produceTo(t, addrs[0], p, 1, 1)
	}
	// dials opens readers of partitions 0..n-1 on a stream of its own,
	// reads each one's record, and returns how many connections the
	// stream dialled.
	dials := func(n int) int64 {
		var count atomic.Int64
		var d net.Dialer
		s, err := kafka.NewWithDialer(kafka.Config{Brokers: addrs, Topic: testTopic, RequestTimeout: 5 * time.Second},
			func(ctx context.Context, network, host string) (net.Conn, error) {
				count.Add(1)
				return d.DialContext(ctx, network, host)
			})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		var readers []brokers.Reader
		for p := range n {
			r, err := s.Open(brokertest.Context(t, 10*time.Second), strconv.Itoa(p), brokers.Start{Mode: brokers.Earliest})
			if err != nil {
				t.Fatal(err)
			}
			readers = append(readers, r)
		}
		for _, r := range readers {
			if got, _ := readAll(t, r, 1, 10); string(got[0].Value) != "m-0" {
				t.Fatalf("read %v", valuesOf(got))
			}
		}
		if k := kafka.Clients(s); k != 1 {
			t.Fatalf("%d readers of distinct partitions use %d clients, want 1", n, k)
		}
		return count.Load()
	}
	few, many := dials(4), dials(64)
	t.Logf("connections dialled: %d for 4 partitions, %d for 64, on %d brokers", few, many, brokerCount)
	// Two clients (admin and the shared one), each with a bootstrap
	// connection and at most two per broker (requests, fetches), whatever
	// the partitions: one client per partition dialled 17 for 4 and 245
	// for 64.
	bound := int64(2 * (1 + 2*brokerCount))
	if many > bound || few > bound {
		t.Fatalf("64 partitions dialled %d connections, 4 dialled %d: want both within the same bound, %d", many, few, bound)
	}
}

// A reader whose unit does not fetch holds about one batch: its partition
// is paused in the shared client, which goes on fetching the others, and
// resumed when the unit drains it; nothing is lost or repeated.
func TestBackPressurePausesPartition(t *testing.T) {
	const (
		records  = 1000
		perBatch = 10
		batch    = 20 // the reader's Fetch max
	)
	fc := startCluster(t, 2)
	fetches := countFetches(fc)
	// One record batch per partition per fetch response.
	s := newStreamOf(t, fc, kafka.Config{FetchMaxPartitionBytes: 1})
	ctx := brokertest.Context(t, 30*time.Second)
	slow := openEarliest(t, s)
	idle, err := s.Open(ctx, "1", brokers.Start{Mode: brokers.Earliest}) // keeps the client fetching
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	// The first Fetch names the reader's batch; until then the buffer
	// takes one fetch response.
	if res, err := slow.Fetch(ctx, batch, 0); err != nil || len(res.Messages) > 0 {
		t.Fatalf("fetch of an empty partition: %v, %v", res.Messages, err)
	}
	produceTo(t, fc.addr(), 0, records, perBatch)

	bound := batch + perBatch
	waitFor(t, "pause of the partition nobody fetches", func() bool {
		st := kafka.Buffer(slow)
		return st.Paused || st.Buffered > bound
	})
	at := fetches.Load()
	waitFor(t, "fetch requests after the pause", func() bool { return fetches.Load() >= at+3 })
	st := kafka.Buffer(slow)
	if st.Peak > bound || st.Buffered > bound || !st.Paused {
		t.Fatalf("after %d more fetch requests: %+v, want at most one batch (%d) and one fetch (%d) held, and paused",
			fetches.Load()-at, st, batch, perBatch)
	}

	got := readRest(t, slow, records, batch)
	for i, m := range got {
		if m.Position != strconv.Itoa(i) || string(m.Value) != "m-"+strconv.Itoa(i) {
			t.Fatalf("record %d is %s at %s: lost or repeated across pauses", i, m.Value, m.Position)
		}
	}
	if st := kafka.Buffer(slow); st.Paused || st.Peak > bound {
		t.Fatalf("after reading everything: %+v, want resumed, never more than %d held", st, bound)
	}
}

// countFetches counts the fetch requests fc receives from now on.
func countFetches(fc *fakeCluster) *atomic.Int64 {
	c := fc.cluster()
	var fetches atomic.Int64
	c.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		fetches.Add(1)
		return nil, nil, false
	})
	return &fetches
}

// readRest reads n messages with Fetch max at a time.
func readRest(t *testing.T, r brokers.Reader, n, max int) []brokers.Message {
	t.Helper()
	got, _ := readAll(t, r, n, max)
	return got
}

// A position error of one partition reaches its reader only: the reader of
// another partition of the same stream, on the same client, reads on.
func TestPartitionErrorStaysWithItsReader(t *testing.T) {
	fc := startCluster(t, 5)
	for _, p := range []int32{3, 4} {
		produceTo(t, fc.addr(), p, 10, 1)
	}
	s := newStreamOf(t, fc, kafka.Config{FetchMaxPartitionBytes: 1})
	ctx := brokertest.Context(t, 30*time.Second)
	var readers []brokers.Reader
	for _, p := range []string{"3", "4"} {
		r, err := s.Open(ctx, p, brokers.Start{Mode: brokers.Earliest})
		if err != nil {
			t.Fatal(err)
		}
		readers = append(readers, r)
	}
	three, four := readers[0], readers[1]
	readAll(t, three, 1, 1)
	readAll(t, four, 1, 1)
	if err := fc.cluster().DeleteRecords(testTopic, 3, 8); err != nil {
		t.Fatal(err)
	}
	if _, err := fetchUntilError(t, three); !errors.Is(err, brokers.ErrPositionGone) || brokers.Retryable(err) {
		t.Fatalf("partition 3 after its records were deleted: %v, want non-retryable ErrPositionGone", err)
	}
	produceTo(t, fc.addr(), 4, 1, 1) // m-0 again, at offset 10
	got, _ := readAll(t, four, 10, 100)
	want := []string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10"}
	if !slices.Equal(positionsOf(got), want) {
		t.Fatalf("partition 4 read %v after partition 3 failed, want %v", positionsOf(got), want)
	}
	if _, err := three.Fetch(ctx, 10, 0); !errors.Is(err, brokers.ErrPositionGone) {
		t.Fatalf("partition 3 again: %v, want its error to stay", err)
	}
}

// Wake calls back when an idle reader's records arrive, and at once when
// they are there already.
func TestWake(t *testing.T) {
	fc := startCluster(t, 1)
	s := newStreamOf(t, fc, kafka.Config{})
	r := openEarliest(t, s)
	w, ok := r.(brokers.Waker)
	if !ok {
		t.Fatal("the Kafka reader is not a brokers.Waker")
	}
	woken := make(chan struct{}, 2)
	w.Wake(func() { woken <- struct{}{} })
	produceTo(t, fc.addr(), 0, 1, 1)
	select {
	case <-woken:
	case <-brokertest.Context(t, 20*time.Second).Done():
		t.Fatal("no wake-up after a record arrived")
	}
	w.Wake(func() { woken <- struct{}{} })
	select {
	case <-woken:
	default:
		t.Fatal("wake with a record buffered was not called at once")
	}
	if got, _ := readAll(t, r, 1, 10); string(got[0].Value) != "m-0" {
		t.Fatalf("read %v", valuesOf(got))
	}
	cancel := w.Wake(func() { woken <- struct{}{} })
	defer cancel()
	_ = s.Close()
	select {
	case <-woken:
	case <-brokertest.Context(t, 10*time.Second).Done():
		t.Fatal("Stream.Close did not call a pending wake-up")
	}
}

// Two readers of one partition at once get a client each, the second
// closed with its reader; each reads the partition from its own start.
func TestTwoReadersOfOnePartition(t *testing.T) {
	fc := startCluster(t, 1)
	produceTo(t, fc.addr(), 0, 5, 1)
	s := newStreamOf(t, fc, kafka.Config{})
	ctx := brokertest.Context(t, 30*time.Second)
	a := openEarliest(t, s)
	b, err := s.Open(ctx, "0", brokers.Start{After: "2"})
	if err != nil {
		t.Fatal(err)
	}
	if k := kafka.Clients(s); k != 2 {
		t.Fatalf("two readers of one partition use %d clients, want 2", k)
	}
	if got, _ := readAll(t, a, 5, 100); !slices.Equal(positionsOf(got), []string{"0", "1", "2", "3", "4"}) {
		t.Fatalf("first reader read %v", positionsOf(got))
	}
	if got, _ := readAll(t, b, 2, 100); !slices.Equal(positionsOf(got), []string{"3", "4"}) {
		t.Fatalf("second reader read %v", positionsOf(got))
	}
	_ = b.Close()
	if k := kafka.Clients(s); k != 1 {
		t.Fatalf("after the second reader closed: %d clients, want 1", k)
	}
	// Closed and opened again on the shared client: the new reader starts
	// where it is told, whatever the old one had buffered.
	_ = a.Close()
	c, err := s.Open(ctx, "0", brokers.Start{After: "3"})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := readAll(t, c, 1, 100); !slices.Equal(positionsOf(got), []string{"4"}) {
		t.Fatalf("reopened reader read %v", positionsOf(got))
	}
	_ = c.Close()
	// A reader that closes with records buffered ahead of a later reader's
	// start: none of them reaches the later one.
	ahead, err := s.Open(ctx, "0", brokers.Start{After: "1"})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := readAll(t, ahead, 1, 1); !slices.Equal(positionsOf(got), []string{"2"}) {
		t.Fatalf("reader after 1 read %v", positionsOf(got))
	}
	_ = ahead.Close()
	if got, _ := readAll(t, openEarliest(t, s), 5, 100); !slices.Equal(positionsOf(got), []string{"0", "1", "2", "3", "4"}) {
		t.Fatalf("reader from the start after a reader ahead closed read %v", positionsOf(got))
	}
}

// Opening a reader lists offsets of its own partition only: listing every
// partition of the topic for each reader cost n² offsets for n readers
// (1,024 partitions took 4.6 s to open).
func TestOffsetListingsNameOnePartition(t *testing.T) {
	fc := startCluster(t, 8)
	produceTo(t, fc.addr(), 5, 3, 1)
	c := fc.cluster()
	var listings, most atomic.Int64
	c.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		n := 0
		for _, t := range req.(*kmsg.ListOffsetsRequest).Topics {
			n += len(t.Partitions)
		}
		listings.Add(1)
		for {
			m := most.Load()
			if int64(n) <= m || most.CompareAndSwap(m, int64(n)) {
				break
			}
		}
		return nil, nil, false
	})
	s := newStreamOf(t, fc, kafka.Config{})
	ctx := brokertest.Context(t, 20*time.Second)
	for _, mode := range []brokers.StartMode{brokers.Earliest, brokers.Latest} {
		if _, err := s.Resolve(ctx, "5", mode); err != nil {
			t.Fatal(err)
		}
		r, err := s.Open(ctx, "5", brokers.Start{After: "0"})
		if err != nil {
			t.Fatal(err)
		}
		_ = r.Close()
	}
	if _, err := s.Open(ctx, "5", brokers.Start{At: time.UnixMilli(1)}); err != nil {
		t.Fatal(err)
	}
	if listings.Load() == 0 || most.Load() != 1 {
		t.Fatalf("%d offset listings, the largest naming %d partitions: want each to name one", listings.Load(), most.Load())
	}
}

// Before a reader's first Fetch names its batch, the client fetches one
// response of its partition and pauses it: a reader opened long before it
// reads (or whose records are trimmed meanwhile) is not read ahead (a
// default of 500 records let a trimmed partition's reader miss its
// ErrPositionGone).
func TestNoReadAheadBeforeFirstFetch(t *testing.T) {
	const perBatch = 10
	fc := startCluster(t, 2)
	produceTo(t, fc.addr(), 0, 100, perBatch)
	fetches := countFetches(fc)
	s := newStreamOf(t, fc, kafka.Config{FetchMaxPartitionBytes: 1})
	r := openEarliest(t, s)
	idle, err := s.Open(brokertest.Context(t, 10*time.Second), "1", brokers.Start{Mode: brokers.Earliest})
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	waitFor(t, "a first fetch response", func() bool { return kafka.Buffer(r).Buffered > 0 })
	at := fetches.Load()
	waitFor(t, "fetch requests after it", func() bool { return fetches.Load() >= at+3 })
	if st := kafka.Buffer(r); st.Peak > perBatch || !st.Paused {
		t.Fatalf("before the first Fetch: %+v, want one response (%d records) held and the partition paused", st, perBatch)
	}
	if got, _ := readAll(t, r, 100, 100); len(got) != 100 || got[99].Position != "99" {
		t.Fatalf("read %d records, the last at %s", len(got), got[len(got)-1].Position)
	}
}
