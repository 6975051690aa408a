package kinesis_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/brokertest"
	"github.com/drover-dev/drover/brokers/kinesis"
)

// fakeKinesis answers the calls a reader makes from a script, and records
// them, for the cases kinesalite cannot produce: throttling, an expired
// iterator, and counting GetRecords calls.
type fakeKinesis struct {
	mu        sync.Mutex
	records   func(call int, iter string) (status int, body string) // GetRecords answers
	iterators []map[string]any                                      // GetShardIterator requests
	calls     []time.Time                                           // GetRecords times
	// iterator, when set, answers GetShardIterator request n (from 1);
	// status 0 means the default answer.
	iterator func(n int, in map[string]any) (status int, body string)
	// date is the Date header of every answer: "" is net/http's own,
	// "none" none at all.
	date string
}

func newFake(t *testing.T, records func(call int, iter string) (int, string)) (*fakeKinesis, string) {
	return newFakeWith(t, &fakeKinesis{records: records})
}

func newFakeWith(t *testing.T, f *fakeKinesis) (*fakeKinesis, string) {
	srv := httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(srv.Close)
	return f, srv.URL
}

func (f *fakeKinesis) serve(w http.ResponseWriter, r *http.Request) {
	var in map[string]any
	body, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(body, &in)
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	f.mu.Lock()
	defer f.mu.Unlock()
	switch f.date {
	case "":
	case "none":
		w.Header()["Date"] = nil
	default:
		w.Header().Set("Date", f.date)
	}
	switch strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "Kinesis_20131202.") {
	case "DescribeStreamSummary":
		io.WriteString(w, `{"StreamDescriptionSummary":{"StreamName":"s","StreamStatus":"ACTIVE","OpenShardCount":1}}`)
	case "GetShardIterator":
		f.iterators = append(f.iterators, in)
		if f.iterator != nil {
			if status, body := f.iterator(len(f.iterators), in); status != 0 {
				w.WriteHeader(status)
				io.WriteString(w, body)
				return
			}
		}
		io.WriteString(w, `{"ShardIterator":"it-acquired-`+string(rune('0'+len(f.iterators)))+`"}`)
	case "GetRecords":
		f.calls = append(f.calls, time.Now())
		status, out := f.records(len(f.calls), in["ShardIterator"].(string))
		w.WriteHeader(status)
		io.WriteString(w, out)
	default:
		w.WriteHeader(400)
		io.WriteString(w, `{"__type":"InvalidArgumentException","message":"not faked"}`)
	}
}

func (f *fakeKinesis) snapshot() ([]time.Time, []map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.calls...), append([]map[string]any(nil), f.iterators...)
}

func fakeStream(t *testing.T, endpoint string, cfg kinesis.Config) *kinesis.Stream {
	t.Helper()
	cfg.StreamName = "s"
	cfg.Region = "us-east-1"
	cfg.Endpoint = endpoint
	cfg.AccessKeyID, cfg.SecretAccessKey = "AKID", "secret"
	s, err := kinesis.NewStream(brokertest.Context(t, 10*time.Second), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func recordsBody(next string, seqs ...string) string {
	var recs []string
	for _, s := range seqs {
		recs = append(recs, `{"SequenceNumber":"`+s+`","PartitionKey":"k","Data":"dg==","ApproximateArrivalTimestamp":1.7e9}`)
	}
	nx := ""
	if next != "" {
		nx = `,"NextShardIterator":"` + next + `"`
	}
	return `{"Records":[` + strings.Join(recs, ",") + `],"MillisBehindLatest":0` + nx + `}`
}

const (
	throttled = `{"__type":"ProvisionedThroughputExceededException","message":"Rate exceeded for shard"}`
	expired   = `{"__type":"ExpiredIteratorException","message":"Iterator expired"}`
)

// TestThrottleAndExpiredIterator: a throttled GetRecords pauses the reader
// for ThrottleBackoff and is retried within the wait; an expired iterator
// is replaced by AT_SEQUENCE_NUMBER of the last record returned, which is
// dropped, so nothing is lost or repeated.
func TestThrottleAndExpiredIterator(t *testing.T) {
	fake, ep := newFake(t, func(call int, iter string) (int, string) {
		switch call {
		case 1:
			return 200, recordsBody("it-1", "1", "2")
		case 2:
			return 400, throttled
		case 3:
			return 400, expired
		default:
			if iter != "it-acquired-2" {
				return 400, `{"__type":"InvalidArgumentException","message":"wrong iterator ` + iter + `"}`
			}
			return 200, recordsBody("it-next", "2", "3")
		}
	})
	const backoff = 300 * time.Millisecond
	s := fakeStream(t, ep, kinesis.Config{PollInterval: 50 * time.Millisecond, ThrottleBackoff: backoff})
	r, err := s.OpenReader(brokertest.Context(t, 10*time.Second), "shardId-000000000000", brokers.Start{Mode: brokers.Earliest})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	res, err := r.Fetch(brokertest.Context(t, 10*time.Second), 10, time.Second)
	if err != nil || len(res.Messages) != 2 {
		t.Fatalf("first fetch %+v, %v", res, err)
	}
	res, err = r.Fetch(brokertest.Context(t, 10*time.Second), 10, 5*time.Second)
	if err != nil || len(res.Messages) != 1 || res.Messages[0].Position != "3" {
		t.Fatalf("fetch through throttling and expiry = %+v, %v; want the record after 2", res, err)
	}
	calls, iters := fake.snapshot()
	if len(calls) != 4 {
		t.Fatalf("%d GetRecords calls, want 4", len(calls))
	}
	if gap := calls[2].Sub(calls[1]); gap < backoff*9/10 {
		t.Fatalf("retried %v after a throttle, want at least %v", gap, backoff)
	}
	if len(iters) != 2 || iters[0]["ShardIteratorType"] != "TRIM_HORIZON" ||
		iters[1]["ShardIteratorType"] != "AT_SEQUENCE_NUMBER" || iters[1]["StartingSequenceNumber"] != "2" {
		t.Fatalf("iterator requests %v, want TRIM_HORIZON then AT_SEQUENCE_NUMBER 2", iters)
	}
}

// TestThrottledFetchReturnsRetryable: when the throttle pause outlasts the
// wait, Fetch returns a retryable error and the next Fetch is not sent
// before the pause ends.
func TestThrottledFetchReturnsRetryable(t *testing.T) {
	fake, ep := newFake(t, func(call int, iter string) (int, string) {
		if call == 1 {
			return 400, throttled
		}
		return 200, recordsBody("it-next", "5")
	})
	const backoff = 500 * time.Millisecond
	s := fakeStream(t, ep, kinesis.Config{ThrottleBackoff: backoff})
	r, err := s.OpenReader(brokertest.Context(t, 10*time.Second), "shardId-000000000000", brokers.Start{Mode: brokers.Earliest})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, err = r.Fetch(brokertest.Context(t, 10*time.Second), 10, 100*time.Millisecond)
	var be *brokers.Error
	if !errors.As(err, &be) || !be.Retryable || !strings.Contains(err.Error(), "ProvisionedThroughputExceeded") {
		t.Fatalf("throttled fetch: %v, want a retryable error", err)
	}
	res, err := r.Fetch(brokertest.Context(t, 10*time.Second), 10, 2*time.Second)
	if err != nil || len(res.Messages) != 1 {
		t.Fatalf("fetch after the pause = %+v, %v", res, err)
	}
	calls, _ := fake.snapshot()
	if gap := calls[1].Sub(calls[0]); gap < backoff*9/10 {
		t.Fatalf("next GetRecords %v after a throttle, want at least %v", gap, backoff)
	}
}

// TestFetchPacing: an empty fetch waiting 1 s polls GetRecords no more
// than once per PollInterval (200 ms: 5 calls per second per shard).
func TestFetchPacing(t *testing.T) {
	fake, ep := newFake(t, func(call int, iter string) (int, string) {
		return 200, recordsBody("it-next")
	})
	s := fakeStream(t, ep, kinesis.Config{})
	r, err := s.OpenReader(brokertest.Context(t, 10*time.Second), "shardId-000000000000", brokers.Start{Mode: brokers.Latest})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for range 2 {
		res, err := r.Fetch(brokertest.Context(t, 10*time.Second), 10, time.Second)
		if err != nil || len(res.Messages) != 0 {
			t.Fatalf("empty fetch = %+v, %v", res, err)
		}
	}
	calls, _ := fake.snapshot()
	if len(calls) < 8 || len(calls) > 11 {
		t.Fatalf("%d GetRecords calls in two 1 s fetches, want about 10", len(calls))
	}
	// The gaps are seen where the requests arrive: one that reached the
	// fake late (a loaded machine, the race detector) shortens the next
	// gap, so each gap only has to be most of the interval; the count
	// above bounds the rate.
	for i := 1; i < len(calls); i++ {
		if gap := calls[i].Sub(calls[i-1]); gap < kinesis.DefaultPollInterval*70/100 {
			t.Fatalf("GetRecords calls %d and %d %v apart, want at least %v", i-1, i, gap, kinesis.DefaultPollInterval)
		}
	}
}

// serverDate is the Date header the fakes of the start-time tests send: an
// hour before the local clock, so that a time taken from the local clock
// cannot pass for it.
func serverDate() (string, time.Time) {
	d := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	return d.Format(http.TimeFormat), d
}

// timestampOf is the AT_TIMESTAMP of a GetShardIterator request.
func timestampOf(in map[string]any) time.Time {
	v, _ := in["Timestamp"].(float64)
	return time.UnixMilli(int64(v*1000 + 0.5)).UTC()
}

// TestResolveTimes: Resolve(Latest) is At = the server's Date less
// ServerClockMargin; without a Date header, the local time before the call
// less LocalClockMargin. Resolve(Earliest) is Start{Mode: Earliest}. Each
// checks the shard with one GetShardIterator (LATEST, TRIM_HORIZON).
func TestResolveTimes(t *testing.T) {
	date, d := serverDate()
	fake, ep := newFakeWith(t, &fakeKinesis{date: date})
	s := fakeStream(t, ep, kinesis.Config{})
	start, err := s.Resolve(brokertest.Context(t, 10*time.Second), "shardId-000000000000", brokers.Latest)
	if want := d.Add(-kinesis.ServerClockMargin); err != nil || start.After != "" || !start.At.Equal(want) {
		t.Fatalf("resolve latest = %+v, %v; want At %v (Date %s less the margin)", start, err, want, date)
	}
	start, err = s.Resolve(brokertest.Context(t, 10*time.Second), "shardId-000000000000", brokers.Earliest)
	if err != nil || start != (brokers.Start{Mode: brokers.Earliest}) {
		t.Fatalf("resolve earliest = %+v, %v", start, err)
	}
	_, iters := fake.snapshot()
	if len(iters) != 2 || iters[0]["ShardIteratorType"] != "LATEST" || iters[1]["ShardIteratorType"] != "TRIM_HORIZON" {
		t.Fatalf("iterator requests %v, want LATEST then TRIM_HORIZON", iters)
	}

	_, ep = newFakeWith(t, &fakeKinesis{date: "none"})
	s = fakeStream(t, ep, kinesis.Config{})
	before := time.Now()
	start, err = s.Resolve(brokertest.Context(t, 10*time.Second), "shardId-000000000000", brokers.Latest)
	after := time.Now()
	if err != nil || start.At.Before(before.Add(-kinesis.LocalClockMargin)) || start.At.After(after.Add(-kinesis.LocalClockMargin)) {
		t.Fatalf("resolve latest without a Date = %+v, %v; want the local time less %v (%v..%v)",
			start, err, kinesis.LocalClockMargin, before.Add(-kinesis.LocalClockMargin), after.Add(-kinesis.LocalClockMargin))
	}
}

// TestStartAtLaterThanServer: a Start.At that Kinesis refuses as later than
// its clock (told by the answer's Date, whatever the message says) is read
// from LATEST; when that iterator expires before any record came, the
// reader asks AT_TIMESTAMP of the server's time of the LATEST call less the
// margin, not of the local clock nor of the refused time, so nothing that
// arrived meanwhile is skipped. A LATEST start expires the same way.
func TestStartAtLaterThanServer(t *testing.T) {
	date, d := serverDate()
	for _, start := range []brokers.Start{{At: d.Add(time.Minute)}, {Mode: brokers.Latest}} {
		fake, ep := newFakeWith(t, &fakeKinesis{
			date: date,
			iterator: func(n int, in map[string]any) (int, string) {
				if in["ShardIteratorType"] == "AT_TIMESTAMP" && timestampOf(in).After(d.Add(time.Second)) {
					return 400, `{"__type":"InvalidArgumentException","message":"Timestamp is in the future"}`
				}
				return 0, ""
			},
			records: func(call int, iter string) (int, string) {
				if call == 1 {
					return 400, expired
				}
				return 200, recordsBody("it-next", "7")
			},
		})
		s := fakeStream(t, ep, kinesis.Config{PollInterval: 10 * time.Millisecond})
		r, err := s.OpenReader(brokertest.Context(t, 10*time.Second), "shardId-000000000000", start)
		if err != nil {
			t.Fatalf("open %+v: %v", start, err)
		}
		res, err := r.Fetch(brokertest.Context(t, 10*time.Second), 10, 2*time.Second)
		r.Close()
		if err != nil || len(res.Messages) != 1 {
			t.Fatalf("fetch from %+v through an expiry = %+v, %v", start, res, err)
		}
		_, iters := fake.snapshot()
		var types []any
		for _, in := range iters {
			types = append(types, in["ShardIteratorType"])
		}
		want := []any{"LATEST", "AT_TIMESTAMP"}
		if !start.At.IsZero() {
			want = []any{"AT_TIMESTAMP", "LATEST", "AT_TIMESTAMP"}
		}
		if fmt.Sprint(types) != fmt.Sprint(want) {
			t.Fatalf("start %+v: iterator requests %v, want %v", start, types, want)
		}
		if got, want := timestampOf(iters[len(iters)-1]), d.Add(-kinesis.ServerClockMargin); !got.Equal(want) {
			t.Fatalf("start %+v: AT_TIMESTAMP %v after the expiry, want %v (the LATEST call's Date less the margin)", start, got, want)
		}
	}
}

// TestMillisBehindLatest: Kinesis dates what a reader has not read, it does
// not count it: MillisBehindLatest > 0 is Lag -1 and Oldest that long
// before the call, 0 is Lag 0 (caught up). kinesalite answers 0 for every
// open shard, so the fake gives the other answers.
func TestMillisBehindLatest(t *testing.T) {
	const behind = 90_000 // ms
	_, ep := newFake(t, func(call int, iter string) (int, string) {
		body := recordsBody("it-next", fmt.Sprint(call))
		if call == 1 {
			body = strings.Replace(body, `"MillisBehindLatest":0`, fmt.Sprintf(`"MillisBehindLatest":%d`, behind), 1)
		}
		return 200, body
	})
	s := fakeStream(t, ep, kinesis.Config{PollInterval: 10 * time.Millisecond})
	r, err := s.OpenReader(brokertest.Context(t, 10*time.Second), "shardId-000000000000", brokers.Start{Mode: brokers.Earliest})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	before := time.Now()
	res, err := r.Fetch(brokertest.Context(t, 10*time.Second), 10, time.Second)
	after := time.Now()
	if err != nil || len(res.Messages) != 1 {
		t.Fatalf("fetch %+v, %v", res, err)
	}
	lo, hi := before.Add(-behind*time.Millisecond), after.Add(-behind*time.Millisecond)
	if res.Lag != -1 || res.Oldest.Before(lo) || res.Oldest.After(hi) {
		t.Fatalf("lag %d oldest %v; want -1 and between %v and %v (the call less MillisBehindLatest)", res.Lag, res.Oldest, lo, hi)
	}
	res, err = r.Fetch(brokertest.Context(t, 10*time.Second), 10, time.Second)
	if err != nil || res.Lag != 0 || !res.Oldest.IsZero() {
		t.Fatalf("caught up: %+v, %v; want lag 0, no oldest", res, err)
	}
}
