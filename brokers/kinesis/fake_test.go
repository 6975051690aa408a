package kinesis_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/brokers"
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
}

func newFake(t *testing.T, records func(call int, iter string) (int, string)) (*fakeKinesis, string) {
	f := &fakeKinesis{records: records}
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
	switch strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "Kinesis_20131202.") {
	case "DescribeStreamSummary":
		io.WriteString(w, `{"StreamDescriptionSummary":{"StreamName":"s","StreamStatus":"ACTIVE","OpenShardCount":1}}`)
	case "GetShardIterator":
		f.iterators = append(f.iterators, in)
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
	s, err := kinesis.NewStream(ctxT(t, 10*time.Second), cfg)
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
	r, err := s.OpenReader(ctxT(t, 10*time.Second), "shardId-000000000000", brokers.Start{Mode: brokers.Earliest})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	res, err := r.Fetch(ctxT(t, 10*time.Second), 10, time.Second)
	if err != nil || len(res.Messages) != 2 {
		t.Fatalf("first fetch %+v, %v", res, err)
	}
	res, err = r.Fetch(ctxT(t, 10*time.Second), 10, 5*time.Second)
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
	r, err := s.OpenReader(ctxT(t, 10*time.Second), "shardId-000000000000", brokers.Start{Mode: brokers.Earliest})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, err = r.Fetch(ctxT(t, 10*time.Second), 10, 100*time.Millisecond)
	var be *brokers.Error
	if !errors.As(err, &be) || !be.Retryable || !strings.Contains(err.Error(), "ProvisionedThroughputExceeded") {
		t.Fatalf("throttled fetch: %v, want a retryable error", err)
	}
	res, err := r.Fetch(ctxT(t, 10*time.Second), 10, 2*time.Second)
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
	r, err := s.OpenReader(ctxT(t, 10*time.Second), "shardId-000000000000", brokers.Start{Mode: brokers.Latest})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for range 2 {
		res, err := r.Fetch(ctxT(t, 10*time.Second), 10, time.Second)
		if err != nil || len(res.Messages) != 0 {
			t.Fatalf("empty fetch = %+v, %v", res, err)
		}
	}
	calls, _ := fake.snapshot()
	if len(calls) < 8 || len(calls) > 11 {
		t.Fatalf("%d GetRecords calls in two 1 s fetches, want about 10", len(calls))
	}
	for i := 1; i < len(calls); i++ {
		if gap := calls[i].Sub(calls[i-1]); gap < kinesis.DefaultPollInterval*95/100 {
			t.Fatalf("GetRecords calls %d and %d %v apart, want at least %v", i-1, i, gap, kinesis.DefaultPollInterval)
		}
	}
}
