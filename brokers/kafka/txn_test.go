package kafka_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/brokertest"
	"github.com/drover-dev/drover/brokers/kafka"
)

// producers are a plain and a transactional producer of one cluster.
type producers struct {
	plain, txn *kgo.Client
}

// newProducers writes to partition 0 (records name no other).
func newProducers(t *testing.T, fc *fakeCluster) producers {
	t.Helper()
	var p producers
	for i, extra := range [][]kgo.Opt{nil, {kgo.TransactionalID("drover-test-txn")}} {
		opts := append([]kgo.Opt{kgo.SeedBrokers(fc.addr()), kgo.DefaultProduceTopic(testTopic),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RetryTimeout(5 * time.Second), kgo.ProducerLinger(0)}, extra...)
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		if i == 0 {
			p.plain = cl
		} else {
			p.txn = cl
		}
	}
	return p
}

func produceValues(t *testing.T, cl *kgo.Client, values ...string) {
	t.Helper()
	for _, v := range values {
		if err := cl.ProduceSync(brokertest.Context(t, 10*time.Second), kgo.StringRecord(v)).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}
}

// txn writes values in one transaction and ends it with commit.
func (p producers) inTxn(t *testing.T, commit kgo.TransactionEndTry, values ...string) {
	t.Helper()
	if err := p.txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceValues(t, p.txn, values...)
	if err := p.txn.EndTransaction(brokertest.Context(t, 10*time.Second), commit); err != nil {
		t.Fatalf("end transaction: %v", err)
	}
}

// writeTxnLog writes, to partition 0: a plain record, a transaction that
// aborts with a plain record written while it was open, another plain
// record, and a transaction that commits, last, so that the log ends with
// its commit marker:
//
//	0 plain-0, 1 aborted-0, 2 plain-1, 3 aborted-1, 4 abort marker,
//	5 plain-2, 6 committed-0, 7 committed-1, 8 commit marker; end 9.
func writeTxnLog(t *testing.T, fc *fakeCluster) {
	t.Helper()
	p := newProducers(t, fc)
	produceValues(t, p.plain, "plain-0")
	if err := p.txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceValues(t, p.txn, "aborted-0")
	produceValues(t, p.plain, "plain-1")
	produceValues(t, p.txn, "aborted-1")
	if err := p.txn.EndTransaction(brokertest.Context(t, 10*time.Second), kgo.TryAbort); err != nil {
		t.Fatalf("abort: %v", err)
	}
	produceValues(t, p.plain, "plain-2")
	p.inTxn(t, kgo.TryCommit, "committed-0", "committed-1")
	if lo, hi := offsets(t, fc); lo != 0 || hi != 9 {
		t.Fatalf("the log is [%d, %d), want [0, 9): the layout the tests assume changed", lo, hi)
	}
}

// offsets lists partition 0's log start and high watermark.
func offsets(t *testing.T, fc *fakeCluster) (lo, hi int64) {
	t.Helper()
	adm := newAdmin(t, fc)
	for i, list := range []func(context.Context, ...string) (kadm.ListedOffsets, error){adm.ListStartOffsets, adm.ListEndOffsets} {
		l, err := list(brokertest.Context(t, 10*time.Second), testTopic)
		if err != nil {
			t.Fatal(err)
		}
		o, ok := l.Lookup(testTopic, 0)
		if !ok || o.Err != nil {
			t.Fatalf("offsets of partition 0: %+v (listed %v)", o, ok)
		}
		if i == 0 {
			lo = o.Offset
		} else {
			hi = o.Offset
		}
	}
	return lo, hi
}

func newAdmin(t *testing.T, fc *fakeCluster) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(fc.addr()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// readAll fetches, max at a time, until it has n messages, and returns them
// with the Result of the fetch that returned the last of them.
func readAll(t *testing.T, r brokers.Reader, n, max int) ([]brokers.Message, brokers.Result) {
	t.Helper()
	ctx := brokertest.Context(t, 20*time.Second)
	var (
		got  []brokers.Message
		last brokers.Result
	)
	for len(got) < n {
		res, err := r.Fetch(ctx, max, time.Second)
		if err != nil {
			t.Fatalf("fetch after %v: %v", valuesOf(got), err)
		}
		if len(res.Messages) > max {
			t.Fatalf("fetch of at most %d returned %d", max, len(res.Messages))
		}
		got = append(got, res.Messages...)
		if len(res.Messages) > 0 {
			last = res
		}
	}
	return got, last
}

func valuesOf(msgs []brokers.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.Value)
	}
	return out
}

func positionsOf(msgs []brokers.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Position
	}
	return out
}

// expectNothing fails if r returns a message within d.
func expectNothing(t *testing.T, r brokers.Reader, d time.Duration) {
	t.Helper()
	res, err := r.Fetch(brokertest.Context(t, d+10*time.Second), 100, d)
	if err != nil || len(res.Messages) > 0 {
		t.Fatalf("fetch = %v, %v, want nothing", valuesOf(res.Messages), err)
	}
}

// groupLag is partition 0's high watermark minus the group's committed
// offset, as broker-side lag tools compute it.
func groupLag(t *testing.T, fc *fakeCluster, group string) int64 {
	t.Helper()
	adm := newAdmin(t, fc)
	lags, err := adm.Lag(brokertest.Context(t, 10*time.Second), group)
	if err != nil {
		t.Fatal(err)
	}
	l := lags[group]
	if err := l.Error(); err != nil {
		t.Fatalf("lag of group %s: %v", group, err)
	}
	pl, ok := l.Lag[testTopic][0]
	if !ok || pl.Err != nil {
		t.Fatalf("lag of group %s partition 0: %+v (found %v)", group, pl, ok)
	}
	return pl.Lag
}

func TestReadCommitted(t *testing.T) {
	want := []string{"plain-0", "plain-1", "plain-2", "committed-0", "committed-1"}
	wantPos := []string{"0", "2", "5", "6", "7"}
	// max 1 returns each record on its own: the commit marker after the
	// last one is still in the client's buffer when it is returned.
	for _, max := range []int{100, 1} {
		t.Run("max "+strconv.Itoa(max), func(t *testing.T) {
			fc := startCluster(t, 1)
			writeTxnLog(t, fc)
			const group = "drover-txn"
			s := newTestStream(t, fc, group)
			r := openEarliest(t, s)
			got, last := readAll(t, r, len(want), max)
			if !slices.Equal(valuesOf(got), want) || !slices.Equal(positionsOf(got), wantPos) {
				t.Fatalf("read %v at %v, want %v at %v", valuesOf(got), positionsOf(got), want, wantPos)
			}
			if last.Lag != 0 {
				t.Fatalf("lag after the last committed record = %d, want 0 (the commit marker is not a message)", last.Lag)
			}
			expectNothing(t, r, 200*time.Millisecond)
			if err := s.Committed(brokertest.Context(t, 10*time.Second), "0", got[len(got)-1].Position); err != nil {
				t.Fatal(err)
			}
			if lag := groupLag(t, fc, group); lag != 0 {
				t.Fatalf("group lag after committing the last record = %d, want 0", lag)
			}
			// A position that is not the last one returned commits its
			// successor, whatever follows it.
			if err := s.Committed(brokertest.Context(t, 10*time.Second), "0", "2"); err != nil {
				t.Fatal(err)
			}
			if lag := groupLag(t, fc, group); lag != 6 {
				t.Fatalf("group lag after committing offset 2 = %d, want 6", lag)
			}
		})
	}
}

func TestReadUncommitted(t *testing.T) {
	fc := startCluster(t, 1)
	writeTxnLog(t, fc)
	r := openEarliest(t, newStreamOf(t, fc, kafka.Config{Isolation: kafka.ReadUncommitted}))
	want := []string{"plain-0", "aborted-0", "plain-1", "aborted-1", "plain-2", "committed-0", "committed-1"}
	got, last := readAll(t, r, len(want), 100)
	if !slices.Equal(valuesOf(got), want) {
		t.Fatalf("read %v, want %v (aborted records included, markers not)", valuesOf(got), want)
	}
	if last.Lag != 0 {
		t.Fatalf("lag at the end = %d, want 0", last.Lag)
	}
	expectNothing(t, r, 200*time.Millisecond)
}

// An open transaction holds a read_committed reader at the last stable
// offset: its lag is counted from there, and Latest starts there, so that
// the transaction's records are read when it commits.
func TestReadCommittedOpenTransaction(t *testing.T) {
	fc := startCluster(t, 1)
	p := newProducers(t, fc)
	produceValues(t, p.plain, "plain-0", "plain-1")
	if err := p.txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceValues(t, p.txn, "open-0")
	produceValues(t, p.plain, "plain-2") // after the open record, held back with it
	if _, hi := offsets(t, fc); hi != 4 {
		t.Fatalf("high watermark %d, want 4", hi)
	}
	s := newTestStream(t, fc, "")
	ctx := brokertest.Context(t, 20*time.Second)

	start, err := s.Resolve(ctx, "0", brokers.Latest)
	if err != nil {
		t.Fatal(err)
	}
	if start != (brokers.Start{After: "1"}) {
		t.Fatalf("Resolve(Latest) with a transaction open at offset 2 = %+v, want After 1 (the last stable offset - 1)", start)
	}
	latest, err := s.Open(ctx, "0", start)
	if err != nil {
		t.Fatal(err)
	}
	early, err := s.Open(ctx, "0", brokers.Start{Mode: brokers.Earliest})
	if err != nil {
		t.Fatal(err)
	}
	got, last := readAll(t, early, 2, 100)
	if !slices.Equal(valuesOf(got), []string{"plain-0", "plain-1"}) {
		t.Fatalf("read %v before the commit", valuesOf(got))
	}
	if last.Lag != 0 {
		t.Fatalf("lag at the last stable offset = %d, want 0 (the open transaction's records cannot be read yet)", last.Lag)
	}
	expectNothing(t, early, 300*time.Millisecond)

	uncommitted, err := kafka.New(kafka.Config{Brokers: []string{fc.addr()}, Topic: testTopic, RequestTimeout: 3 * time.Second, Isolation: kafka.ReadUncommitted})
	if err != nil {
		t.Fatal(err)
	}
	defer uncommitted.Close()
	if start, err := uncommitted.Resolve(ctx, "0", brokers.Latest); err != nil || start != (brokers.Start{After: "3"}) {
		t.Fatalf("read_uncommitted Resolve(Latest) = %+v, %v, want After 3 (the high watermark - 1)", start, err)
	}

	if err := p.txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	for _, r := range []brokers.Reader{early, latest} {
		got, last := readAll(t, r, 2, 100)
		if !slices.Equal(valuesOf(got), []string{"open-0", "plain-2"}) {
			t.Fatalf("read %v after the commit, want [open-0 plain-2]", valuesOf(got))
		}
		if last.Lag != 0 {
			t.Fatalf("lag after the commit = %d, want 0", last.Lag)
		}
	}
}

func TestResolve(t *testing.T) {
	fc := startCluster(t, 2)
	s := newTestStream(t, fc, "")
	ctx := brokertest.Context(t, 30*time.Second)
	resolve := func(mode brokers.StartMode) brokers.Start {
		t.Helper()
		start, err := s.Resolve(ctx, "0", mode)
		if err != nil {
			t.Fatalf("resolve %v: %v", mode, err)
		}
		return start
	}
	beginning := brokers.Start{Mode: brokers.Earliest}
	if e, l := resolve(brokers.Earliest), resolve(brokers.Latest); e != beginning || l != beginning {
		t.Fatalf("empty partition: earliest %+v, latest %+v, want the beginning for both", e, l)
	}

	p := newProducers(t, fc)
	produceValues(t, p.plain, "m-0", "m-1", "m-2", "m-3", "m-4")
	if e, l := resolve(brokers.Earliest), resolve(brokers.Latest); e != beginning || l != (brokers.Start{After: "4"}) {
		t.Fatalf("after 5 records: earliest %+v, latest %+v, want the beginning and After 4", e, l)
	}
	latest, err := s.Open(ctx, "0", resolve(brokers.Latest))
	if err != nil {
		t.Fatal(err)
	}
	produceValues(t, p.plain, "m-5")
	if got, _ := readAll(t, latest, 1, 100); valuesOf(got)[0] != "m-5" {
		t.Fatalf("the resolved latest start read %v first, want m-5", valuesOf(got))
	}

	adm := newAdmin(t, fc)
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: testTopic, Partition: 0, At: 3, LeaderEpoch: -1})
	if resp, err := adm.DeleteRecords(ctx, os); err != nil || resp.Error() != nil {
		t.Fatalf("delete records: %v %v", err, resp.Error())
	}
	earliest := resolve(brokers.Earliest)
	if earliest != (brokers.Start{After: "2"}) {
		t.Fatalf("earliest after trimming to 3 = %+v, want After 2", earliest)
	}
	r, err := s.Open(ctx, "0", earliest)
	if err != nil {
		t.Fatalf("open at the resolved earliest start: %v", err)
	}
	if got, _ := readAll(t, r, 3, 100); !slices.Equal(valuesOf(got), []string{"m-3", "m-4", "m-5"}) {
		t.Fatalf("read %v from the resolved earliest start", valuesOf(got))
	}
	if l := resolve(brokers.Latest); l != (brokers.Start{After: "5"}) {
		t.Fatalf("latest after trimming = %+v, want After 5", l)
	}
	if start, err := s.Resolve(ctx, "1", brokers.Latest); err != nil || start != beginning {
		t.Fatalf("resolve of the other, empty partition = %+v, %v", start, err)
	}

	for _, bad := range []string{"2", "x", "-1"} {
		if _, err := s.Resolve(ctx, bad, brokers.Latest); !errors.Is(err, brokers.ErrUnknownPartition) || brokers.Retryable(err) {
			t.Fatalf("resolve of partition %q: %v, want non-retryable ErrUnknownPartition", bad, err)
		}
	}
	if _, err := s.Resolve(ctx, "0", brokers.StartMode(9)); err == nil || brokers.Retryable(err) {
		t.Fatalf("resolve of an unknown mode: %v", err)
	}
}

func TestOpenAtTime(t *testing.T) {
	fc := startCluster(t, 1)
	p := newProducers(t, fc)
	base := time.UnixMilli(1_700_000_000_000)
	for i := range 4 {
		rec := kgo.StringRecord("m-" + strconv.Itoa(i))
		rec.Timestamp = base.Add(time.Duration(i) * time.Second)
		if err := p.plain.ProduceSync(brokertest.Context(t, 10*time.Second), rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	s := newTestStream(t, fc, "")
	ctx := brokertest.Context(t, 20*time.Second)
	for _, tt := range []struct {
		at   time.Time
		want string
	}{
		{base.Add(-time.Hour), "m-0"},
		{base.Add(2 * time.Second), "m-2"},
		{base.Add(1500 * time.Millisecond), "m-2"},
	} {
		r, err := s.Open(ctx, "0", brokers.Start{At: tt.at})
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := readAll(t, r, 1, 1); valuesOf(got)[0] != tt.want {
			t.Fatalf("at %v: first record %v, want %s", tt.at, valuesOf(got), tt.want)
		}
		_ = r.Close()
	}
	// After every record: the next one written.
	r, err := s.Open(ctx, "0", brokers.Start{At: base.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	expectNothing(t, r, 200*time.Millisecond)
	produceValues(t, p.plain, "m-4")
	if got, _ := readAll(t, r, 1, 1); valuesOf(got)[0] != "m-4" {
		t.Fatalf("at a time after every record: %v, want m-4", valuesOf(got))
	}
}

// wantUnknown checks err is a final ErrPositionUnknown whose message names
// each of parts.
func wantUnknown(t *testing.T, err error, parts ...string) {
	t.Helper()
	if !errors.Is(err, brokers.ErrPositionUnknown) || brokers.Retryable(err) {
		t.Fatalf("error %v (retryable %v), want non-retryable ErrPositionUnknown", err, brokers.Retryable(err))
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not name %q", err, p)
		}
	}
}

// recreate deletes the topic and creates it again with one partition.
func recreate(t *testing.T, fc *fakeCluster) {
	t.Helper()
	c := fc.cluster()
	if err := c.DeleteTopic(testTopic); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateTopic(testTopic, 1, nil); err != nil {
		t.Fatal(err)
	}
}

func TestOpenBeyondTheEnd(t *testing.T) {
	fc := startCluster(t, 1)
	p := newProducers(t, fc)
	produceValues(t, p.plain, "old-0", "old-1", "old-2", "old-3", "old-4")
	recreate(t, fc)
	p = newProducers(t, fc)
	produceValues(t, p.plain, "new-0", "new-1")
	s := newTestStream(t, fc, "")
	_, err := s.Open(brokertest.Context(t, 10*time.Second), "0", brokers.Start{After: "4"})
	wantUnknown(t, err, "partition 0", "offset 4", "end 2")
	// The last record of the new log is a position of it.
	r, err := s.Open(brokertest.Context(t, 10*time.Second), "0", brokers.Start{After: "1"})
	if err != nil {
		t.Fatalf("open after the last record: %v", err)
	}
	expectNothing(t, r, 200*time.Millisecond)
}

// fetchUntilError fetches until r fails, and returns what it read before.
func fetchUntilError(t *testing.T, r brokers.Reader) ([]brokers.Message, error) {
	t.Helper()
	ctx := brokertest.Context(t, 30*time.Second)
	var (
		got       []brokers.Message
		retryable error
	)
	for {
		res, err := r.Fetch(ctx, 100, 500*time.Millisecond)
		if err != nil {
			if ctx.Err() != nil {
				t.Fatalf("no final error within 30 s; the last retryable one: %v", retryable)
			}
			if brokers.Retryable(err) {
				retryable = err // e.g. while the topic is being created again
				continue
			}
			return got, err
		}
		got = append(got, res.Messages...)
	}
}

// readThenRecreate reads the five messages of a fresh topic of fc, deletes
// the topic and creates it again with two new messages, and fetches on the
// same reader until it fails.
func readThenRecreate(t *testing.T, fc *fakeCluster) (brokers.Reader, []brokers.Message, error) {
	t.Helper()
	p := newProducers(t, fc)
	produceValues(t, p.plain, "old-0", "old-1", "old-2", "old-3", "old-4")
	r := openEarliest(t, newTestStream(t, fc, ""))
	readAll(t, r, 5, 100)
	recreate(t, fc)
	p = newProducers(t, fc)
	produceValues(t, p.plain, "new-0", "new-1")
	got, err := fetchUntilError(t, r)
	return r, got, err
}

// A topic deleted and created again under a running reader: the reader's
// offsets belong to the old topic.
func TestRecreatedUnderReader(t *testing.T) {
	fc := startCluster(t, 1)
	r, got, err := readThenRecreate(t, fc)
	if len(got) > 0 {
		t.Fatalf("read %v from the recreated topic", valuesOf(got))
	}
	wantUnknown(t, err, "partition 0", "deleted and created again")
	_, again := r.Fetch(brokertest.Context(t, 10*time.Second), 100, 100*time.Millisecond)
	wantUnknown(t, again)
}

// On a broker without topic IDs (Kafka < 2.8) a recreated topic looks like
// a truncated log: the broker answers out of range beyond its end.
func TestTruncatedUnderReader(t *testing.T) {
	fc := startCluster(t, 1, kafkaBefore28())
	_, got, err := readThenRecreate(t, fc)
	if len(got) > 0 {
		t.Fatalf("read %v from the truncated log", valuesOf(got))
	}
	wantUnknown(t, err, "partition 0", "offset 5", "ends at 2")
}

// A reader that falls below the log start (records deleted before it read
// them) fails with ErrPositionGone, not ErrPositionUnknown.
func TestTrimmedUnderReader(t *testing.T) {
	fc := startCluster(t, 1)
	p := newProducers(t, fc)
	for i := range 10 { // one batch each
		produceValues(t, p.plain, "m-"+strconv.Itoa(i))
	}
	// One batch per fetch response: the reader's client fetches ahead
	// by one batch at most.
	r := openEarliest(t, newStreamOf(t, fc, kafka.Config{FetchMaxPartitionBytes: 1}))
	readAll(t, r, 1, 1)
	if err := fc.cluster().DeleteRecords(testTopic, 0, 8); err != nil {
		t.Fatal(err)
	}
	got, err := fetchUntilError(t, r)
	if !errors.Is(err, brokers.ErrPositionGone) || brokers.Retryable(err) {
		t.Fatalf("after the records ahead were deleted: %v (retryable %v), want non-retryable ErrPositionGone", err, brokers.Retryable(err))
	}
	for i, m := range got { // what the client held before the deletion
		if want := "m-" + strconv.Itoa(i+1); string(m.Value) != want {
			t.Fatalf("read %v before the error", valuesOf(got))
		}
	}
	if !strings.Contains(err.Error(), "oldest held is 8") {
		t.Fatalf("error %q does not name the log start", err)
	}
}

// kafkaBefore28 makes kfake speak the protocol of Kafka 2.7: no topic IDs.
func kafkaBefore28() kfake.Opt { return kfake.MaxVersions(kversion.V2_7_0()) }
