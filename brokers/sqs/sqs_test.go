package sqs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/brokertest"
	"github.com/drover-dev/drover/brokers/sqs"
)

func receiver(t *testing.T, q *sqs.Queue, slot string) *sqs.Receiver {
	t.Helper()
	return brokertest.Open(t, 10*time.Second, "open "+slot, func(ctx context.Context) (*sqs.Receiver, error) {
		return q.OpenReceiver(ctx, slot)
	})
}

// receiveN receives until it has n messages or the deadline passes.
func receiveN(t *testing.T, r *sqs.Receiver, n int, timeout time.Duration) []brokers.Message {
	t.Helper()
	got, _ := brokertest.PollN(t, brokertest.Context(t, timeout), "receive", r.Receive, n)
	return got
}

func msgs(prefix string, n int) []brokers.Message {
	out := make([]brokers.Message, n)
	for i := range out {
		out[i] = brokers.Message{Value: []byte(fmt.Sprintf("%s-%d", prefix, i))}
	}
	return out
}

// TestFieldsAndHeaders checks what a message becomes: the key attribute,
// headers sorted by name, SentTimestamp, the receive count, and on a FIFO
// queue the group id (the key when there is no key attribute) and the
// deduplication id.
func TestFieldsAndHeaders(t *testing.T) {
	onBothKinds(t, 30*time.Second, func(t *testing.T, f *fixture) {
		before := time.Now().Add(-2 * time.Second)
		ids, err := f.send(brokertest.Context(t, 10*time.Second),
			brokers.Message{Key: []byte("k1"), Value: []byte(`{"a":1}`), Headers: []brokers.Header{{Key: "zeta", Value: []byte("z")}, {Key: "alpha", Value: []byte("a")}}},
		)
		if err != nil {
			t.Fatal(err)
		}
		q := f.open(t, f.config())
		r := receiver(t, q, "slot-0")
		m := receiveN(t, r, 1, 10*time.Second)[0]
		if m.ID != ids[0] || m.Position != m.ID || string(m.Value) != `{"a":1}` || string(m.Key) != "k1" || m.Deliveries != 1 {
			t.Fatalf("message %+v, want id %s, key k1, deliveries 1", m, ids[0])
		}
		if m.Time.Before(before) || m.Time.After(time.Now().Add(2*time.Second)) {
			t.Fatalf("time %v is not SentTimestamp", m.Time)
		}
		var keys []string
		for _, hd := range m.Headers {
			keys = append(keys, hd.Key+"="+string(hd.Value))
		}
		want := []string{"alpha=a", "key=k1", "zeta=z"}
		if f.fifo {
			want = append(want, sqs.HeaderGroupID+"=k1", sqs.HeaderDeduplicationID+"=d-1")
		}
		got := strings.Join(keys, ",")
		if !strings.HasPrefix(got, strings.Join(want, ",")) {
			t.Fatalf("headers %s, want %s first", got, strings.Join(want, ","))
		}
		if err := r.Ack(brokertest.Context(t, 10*time.Second), []brokers.Message{m}); err != nil {
			t.Fatal(err)
		}
		if f.fifo {
			// Without a key attribute the group id is the key.
			if _, err := f.client.SendMessage(brokertest.Context(t, 10*time.Second), sendInput(f.url, "v", "grp", "dd")); err != nil {
				t.Fatal(err)
			}
			m := receiveN(t, r, 1, 10*time.Second)[0]
			if string(m.Key) != "grp" {
				t.Fatalf("FIFO message without key attribute: key %q, want the group id", m.Key)
			}
		}
	})
}

// TestRedeliveryAfterReceiverDies: a receiver takes a batch, applies one
// message (into a dedupe table, as drover does) and dies without acking.
// After the visibility timeout another instance gets the whole batch
// again, with the same message ids and a higher receive count; the dedupe
// table refuses the one already applied, so each is applied once.
func TestRedeliveryAfterReceiverDies(t *testing.T) {
	h := newHarness(t)
	f := h.newFixture(t, time.Second)
	if err := f.Send(brokertest.Context(t, 10*time.Second), msgs("m", 3)...); err != nil {
		t.Fatal(err)
	}
	applied := map[string]string{} // dedupe table: message id -> value
	apply := func(ms []brokers.Message) int {
		n := 0
		for _, m := range ms {
			if _, dup := applied[m.ID]; dup {
				continue
			}
			applied[m.ID] = string(m.Value)
			n++
		}
		return n
	}

	dying := f.open(t, f.config())
	first := receiveN(t, receiver(t, dying, "slot-0"), 3, 10*time.Second)
	apply(first[:1])
	diedAt := time.Now()
	if err := dying.Close(); err != nil { // the node is killed: no ack, no nack
		t.Fatal(err)
	}

	r := receiver(t, f.open(t, f.config()), "slot-0")
	again := receiveN(t, r, 3, 15*time.Second)
	if el := time.Since(diedAt); el < 800*time.Millisecond {
		t.Fatalf("redelivered after %v, before the 1 s visibility timeout", el)
	}
	byID := map[string]brokers.Message{}
	for _, m := range first {
		byID[m.ID] = m
	}
	for _, m := range again {
		prev, ok := byID[m.ID]
		if !ok {
			t.Fatalf("redelivered message %s (%s) has an id the first delivery did not have", m.ID, m.Value)
		}
		if string(prev.Value) != string(m.Value) || m.Deliveries <= prev.Deliveries {
			t.Fatalf("redelivery %+v after %+v: want the same value and a higher receive count", m, prev)
		}
	}
	if n := apply(again); n != 2 {
		t.Fatalf("applied %d of the redelivered batch, want 2 (one was applied before the receiver died)", n)
	}
	if len(applied) != 3 {
		t.Fatalf("applied %v, want each of 3 messages once", applied)
	}
	if err := r.Ack(brokertest.Context(t, 10*time.Second), again); err != nil {
		t.Fatal(err)
	}
}

// TestUnsetVisibilityTimeoutIsTheDefault: with Config.VisibilityTimeout
// unset, a receive asks for DefaultVisibilityTimeout (30 s) itself, even
// from a queue created with a VisibilityTimeout attribute of 1 s. drover
// extends in-flight messages on the 30 s schedule; had the queue's 1 s
// applied, the message would be handed to another receiver (another node)
// while the first still processes it.
func TestUnsetVisibilityTimeoutIsTheDefault(t *testing.T) {
	onBothKinds(t, time.Second, func(t *testing.T, f *fixture) { // the queue's attribute: 1 s
		ids, err := f.send(brokertest.Context(t, 10*time.Second), brokers.Message{Key: []byte("k"), Value: []byte("v")})
		if err != nil {
			t.Fatal(err)
		}
		cfg := f.config()
		cfg.VisibilityTimeout = 0 // unset
		first := receiver(t, f.open(t, cfg), "slot-0")
		m := receiveN(t, first, 1, 10*time.Second)[0]
		took := time.Now()
		if m.ID != ids[0] {
			t.Fatalf("received %s, want %s", m.ID, ids[0])
		}
		other := receiver(t, f.open(t, cfg), "slot-0")

		// Absent from every receive for 3 s, three times the queue's own
		// timeout: each Receive long-polls for what is left of them.
		deadline := time.Now().Add(3 * time.Second)
		ctx := brokertest.Context(t, 15*time.Second)
		for left := time.Until(deadline); left > 0; left = time.Until(deadline) {
			res, err := other.Receive(ctx, 10, left)
			if err != nil {
				t.Fatal(err)
			}
			for _, got := range res.Messages {
				t.Fatalf("message %s (delivery %d) handed to another receiver %v after the first took it: the queue's 1 s applied, not 30 s",
					got.ID, got.Deliveries, time.Since(took).Round(time.Millisecond))
			}
		}

		// The other receiver does see it once the first gives it back.
		if err := first.Nack(brokertest.Context(t, 10*time.Second), []brokers.Message{m}, 0); err != nil {
			t.Fatal(err)
		}
		again := receiveN(t, other, 1, 10*time.Second)[0]
		if again.ID != m.ID || again.Deliveries != 2 {
			t.Fatalf("after the nack: %s (deliveries %d), want %s delivered a second time", again.ID, again.Deliveries, m.ID)
		}
		if err := other.Ack(brokertest.Context(t, 10*time.Second), []brokers.Message{again}); err != nil {
			t.Fatal(err)
		}
	})
}

// TestFIFOGroupOrderAcrossReceivers: two receivers compete for a FIFO
// queue with three message groups; each group's messages are received in
// the order they were sent, and never by both receivers at once.
func TestFIFOGroupOrderAcrossReceivers(t *testing.T) {
	h := newHarness(t)
	h.fifo = true
	f := h.newFixture(t, 30*time.Second)
	const groups, per = 3, 20
	var sent []brokers.Message
	for i := range per {
		for g := range groups {
			sent = append(sent, brokers.Message{Key: []byte("g" + strconv.Itoa(g)), Value: []byte(strconv.Itoa(i))})
		}
	}
	if err := f.Send(brokertest.Context(t, 10*time.Second), sent...); err != nil {
		t.Fatal(err)
	}
	q := f.open(t, f.config())
	var (
		mu      sync.Mutex
		order   = map[string][]int{} // group -> values in receive order
		holder  = map[string]int{}   // group -> receiver holding one of its messages
		acking  = map[string]bool{}  // group -> its holder is acking (SQS may already have deleted)
		total   int
		failure error
	)
	ctx := brokertest.Context(t, 60*time.Second)
	fail := func(err error) {
		mu.Lock()
		failure = err
		mu.Unlock()
	}
	work := func(id int, r *sqs.Receiver) {
		for ctx.Err() == nil {
			mu.Lock()
			done := total == groups*per || failure != nil
			mu.Unlock()
			if done {
				return
			}
			res, err := r.Receive(ctx, 4, 500*time.Millisecond)
			if err != nil {
				if ctx.Err() == nil {
					fail(fmt.Errorf("receiver %d: %w", id, err))
				}
				return
			}
			mu.Lock()
			for _, m := range res.Messages {
				g := string(m.Key)
				if other, ok := holder[g]; ok && other != id && !acking[g] {
					failure = fmt.Errorf("group %s delivered to receiver %d while receiver %d holds it", g, id, other)
				}
				holder[g], acking[g] = id, false
				v, _ := strconv.Atoi(string(m.Value))
				order[g] = append(order[g], v)
				total++
			}
			mu.Unlock()
			if len(res.Messages) == 0 {
				continue
			}
			mu.Lock()
			for _, m := range res.Messages {
				acking[string(m.Key)] = true
			}
			mu.Unlock()
			if err := r.Ack(ctx, res.Messages); err != nil {
				fail(fmt.Errorf("receiver %d: ack: %w", id, err))
				return
			}
			mu.Lock()
			for _, m := range res.Messages {
				if holder[string(m.Key)] == id {
					delete(holder, string(m.Key))
					delete(acking, string(m.Key))
				}
			}
			mu.Unlock()
		}
	}
	var wg sync.WaitGroup
	for id := range 2 {
		r := receiver(t, q, "slot-"+strconv.Itoa(id))
		wg.Add(1)
		go func() { defer wg.Done(); work(id, r) }()
	}
	wg.Wait()
	if failure != nil {
		t.Fatal(failure)
	}
	for g := range groups {
		got := order["g"+strconv.Itoa(g)]
		want := make([]int, per)
		for i := range want {
			want[i] = i
		}
		if !slices.Equal(got, want) {
			t.Fatalf("group g%d received in order %v, want %v", g, got, want)
		}
	}
}

// TestLongPollCancelledPromptly: a 20 s long poll ends within a moment of
// its context being cancelled, with context.Canceled.
func TestLongPollCancelledPromptly(t *testing.T) {
	h := newHarness(t)
	f := h.newFixture(t, 30*time.Second)
	r := receiver(t, f.open(t, f.config()), "slot-0")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := r.Receive(ctx, 10, 20*time.Second)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("receive on an empty queue returned at once: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	cancelled := time.Now()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled receive: %v, want context.Canceled", err)
		}
		if el := time.Since(cancelled); el > 500*time.Millisecond {
			t.Fatalf("cancelled receive took %v to return", el)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancelled receive did not return within 5 s")
	}
}

// TestAckForeignMessage: an ack of a message from another
// queue is refused before anything is deleted.
func TestAckForeignMessage(t *testing.T) {
	h := newHarness(t)
	f := h.newFixture(t, 30*time.Second)
	r := receiver(t, f.open(t, f.config()), "slot-0")
	err := r.Ack(brokertest.Context(t, 10*time.Second), []brokers.Message{{ID: "x", Handle: "not ours"}})
	var be *brokers.Error
	if !errors.As(err, &be) || be.Op != sqs.OpAck || be.Retryable {
		t.Fatalf("ack of a foreign message: %v, want a non-retryable ack error", err)
	}
}

func sendInput(url, body, group, dedup string) *awssqs.SendMessageInput {
	return &awssqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(body),
		MessageGroupId: aws.String(group), MessageDeduplicationId: aws.String(dedup)}
}

// refusingProxy is an HTTP proxy in front of the emulator that makes SQS
// refuse chosen entries of DeleteMessageBatch, as SQS does for a receipt
// handle it no longer accepts (fauxqs itself never refuses a delete): an
// entry whose receipt handle starts with "refuse:" is not forwarded (so the
// message is not deleted) and comes back in the response's Failed list.
func refusingProxy(t *testing.T, endpoint string) string {
	t.Helper()
	target, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	director := rp.Director
	rp.Director = func(r *http.Request) {
		director(r)
		if r.Header.Get("X-Amz-Target") != "AmazonSQS.DeleteMessageBatch" {
			return
		}
		var body map[string]any
		raw, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(raw, &body); err != nil {
			r.Body = io.NopCloser(bytes.NewReader(raw))
			return
		}
		var keep []any
		var ids []string
		for _, e := range body["Entries"].([]any) {
			m := e.(map[string]any)
			if strings.HasPrefix(m["ReceiptHandle"].(string), "refuse:") {
				ids = append(ids, m["Id"].(string))
				continue
			}
			keep = append(keep, e)
		}
		if len(keep) == 0 {
			// SQS refuses an empty batch; keep the request valid with
			// an entry that deletes nothing.
			keep = append(keep, map[string]any{"Id": "placeholder", "ReceiptHandle": "none"})
		}
		body["Entries"] = keep
		raw, _ = json.Marshal(body)
		r.Body = io.NopCloser(bytes.NewReader(raw))
		r.ContentLength = int64(len(raw))
		r.Header.Del("Content-Length")
		r.Header.Set("X-Drover-Refused", strings.Join(ids, ","))
	}
	rp.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.Header.Get("X-Amz-Target") != "AmazonSQS.DeleteMessageBatch" {
			return nil
		}
		var ids []string
		if v := resp.Request.Header.Get("X-Drover-Refused"); v != "" {
			ids = strings.Split(v, ",")
		}
		raw, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		var body map[string]any
		if err := json.Unmarshal(raw, &body); err != nil {
			return err
		}
		var ok2 []any
		for _, s := range asSlice(body["Successful"]) {
			if s.(map[string]any)["Id"] != "placeholder" {
				ok2 = append(ok2, s)
			}
		}
		body["Successful"] = ok2
		failed := asSlice(body["Failed"])
		for _, id := range ids {
			failed = append(failed, map[string]any{"Id": id, "Code": "ReceiptHandleIsInvalid", "SenderFault": true,
				"Message": "The input receipt handle is invalid."})
		}
		body["Failed"] = failed
		raw, _ = json.Marshal(body)
		resp.Body = io.NopCloser(bytes.NewReader(raw))
		resp.ContentLength = int64(len(raw))
		resp.Header.Set("Content-Length", strconv.Itoa(len(raw)))
		return nil
	}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	return srv.URL
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

// TestAckPartialFailure: an ack of 12 messages (two DeleteMessageBatch
// requests) in which SQS refuses two entries deletes the other ten and
// reports the two, by message id, in a *BatchError; the two come back
// after the visibility timeout, the ten do not.
func TestAckPartialFailure(t *testing.T) {
	h := newHarness(t)
	f := h.newFixture(t, time.Second)
	if err := f.Send(brokertest.Context(t, 10*time.Second), msgs("m", 12)...); err != nil {
		t.Fatal(err)
	}
	cfg := f.config()
	cfg.Endpoint = refusingProxy(t, h.endpoint)
	r := receiver(t, f.open(t, cfg), "slot-0")
	got := receiveN(t, r, 12, 10*time.Second)
	bad := map[string]bool{got[3].ID: true, got[11].ID: true}
	for _, i := range []int{3, 11} {
		got[i] = sqs.WithReceipt(got[i], "refuse:"+sqs.Receipt(got[i]))
	}

	err := r.Ack(brokertest.Context(t, 10*time.Second), got)
	var be *brokers.Error
	var batch *sqs.BatchError
	if !errors.As(err, &be) || be.Op != sqs.OpAck || !errors.As(err, &batch) {
		t.Fatalf("ack with two refused entries: %v, want a *brokers.Error holding a *sqs.BatchError", err)
	}
	if batch.Total != 12 || len(batch.Failures) != 2 {
		t.Fatalf("batch error %v: want 2 of 12 failed", batch)
	}
	for _, fl := range batch.Failures {
		if !bad[fl.MessageID] || fl.Code != "ReceiptHandleIsInvalid" || !fl.SenderFault {
			t.Fatalf("failure %+v names a message whose delete succeeded, or lacks SQS's code", fl)
		}
	}
	if brokers.Retryable(err) {
		t.Fatalf("%v: only sender faults, want not retryable", err)
	}
	t.Logf("partial ack: %v", err)
	back := receiveN(t, r, 2, 15*time.Second)
	for _, m := range back {
		if !bad[m.ID] {
			t.Fatalf("message %s (%s) came back although its delete succeeded", m.ID, m.Value)
		}
	}
	if err := r.Ack(brokertest.Context(t, 10*time.Second), back); err != nil {
		t.Fatal(err)
	}
	res, err := r.Receive(brokertest.Context(t, 10*time.Second), 10, 2*time.Second)
	if err != nil || len(res.Messages) > 0 {
		t.Fatalf("after acking everything: %d messages, %v", len(res.Messages), err)
	}
}

// TestNackPartialFailure: ChangeMessageVisibilityBatch refuses a receipt
// handle the emulator does not know; Nack reports it per message and
// gives the others back at once.
func TestNackPartialFailure(t *testing.T) {
	h := newHarness(t)
	f := h.newFixture(t, 30*time.Second)
	if err := f.Send(brokertest.Context(t, 10*time.Second), msgs("m", 3)...); err != nil {
		t.Fatal(err)
	}
	r := receiver(t, f.open(t, f.config()), "slot-0")
	got := receiveN(t, r, 3, 10*time.Second)
	badID := got[1].ID
	got[1] = sqs.WithReceipt(got[1], "unknown-receipt-handle")
	err := r.Nack(brokertest.Context(t, 10*time.Second), got, 0)
	var batch *sqs.BatchError
	if !errors.As(err, &batch) || len(batch.Failures) != 1 || batch.Failures[0].MessageID != badID {
		t.Fatalf("nack with one unknown handle: %v, want one failure naming %s", err, badID)
	}
	back := receiveN(t, r, 2, 10*time.Second)
	for _, m := range back {
		if m.ID == badID {
			t.Fatalf("the message whose nack failed came back at once")
		}
	}
}

// TestMessageIDsUniquePerSend: the same body sent twice arrives as two
// messages with two different ids, the ids SQS returned to the sends (the
// dedupe id is unique per message, not per content), on a standard and a
// FIFO queue (distinct deduplication ids).
func TestMessageIDsUniquePerSend(t *testing.T) {
	onBothKinds(t, 30*time.Second, func(t *testing.T, f *fixture) {
		body := brokers.Message{Value: []byte(`{"same":"body"}`)}
		var sent []string
		for range 2 {
			ids, err := f.send(brokertest.Context(t, 10*time.Second), body)
			if err != nil {
				t.Fatal(err)
			}
			sent = append(sent, ids...)
		}
		r := receiver(t, f.open(t, f.config()), "slot-0")
		// A FIFO queue holds the group's next message until the one
		// before is acked.
		got := receiveN(t, r, 1, 20*time.Second)
		if err := r.Ack(brokertest.Context(t, 10*time.Second), got); err != nil {
			t.Fatal(err)
		}
		got = append(got, receiveN(t, r, 1, 20*time.Second)...)
		if got[0].ID == "" || got[0].ID == got[1].ID {
			t.Fatalf("two sends of one body received with ids %q and %q, want two different ids", got[0].ID, got[1].ID)
		}
		want := map[string]bool{sent[0]: true, sent[1]: true}
		for _, m := range got {
			if !want[m.ID] || string(m.Value) != string(body.Value) {
				t.Fatalf("received %q with id %q, sent ids %v", m.Value, m.ID, sent)
			}
		}
		if err := r.Ack(brokertest.Context(t, 10*time.Second), got[1:]); err != nil {
			t.Fatal(err)
		}
	})
}

// TestLagIsUnknown: SQS tells neither a backlog nor an age in a receive
// (ApproximateAgeOfOldestMessage is a CloudWatch metric, which the
// emulator does not serve): Lag -1 and no Oldest, so a unit shows
// lag_seconds -1; the messages carry their SentTimestamp.
func TestLagIsUnknown(t *testing.T) {
	h := newHarness(t)
	f := h.newFixture(t, 30*time.Second)
	before := time.Now().Add(-2 * time.Second)
	if err := f.Send(brokertest.Context(t, 10*time.Second), msgs("m", 2)...); err != nil {
		t.Fatal(err)
	}
	r := receiver(t, f.open(t, f.config()), "slot-0")
	res, err := r.Receive(brokertest.Context(t, 10*time.Second), 1, 5*time.Second)
	if err != nil || len(res.Messages) != 1 {
		t.Fatalf("receive %+v, %v", res, err)
	}
	if res.Lag != -1 || !res.Oldest.IsZero() {
		t.Fatalf("lag %d oldest %v, want -1 and none", res.Lag, res.Oldest)
	}
	if m := res.Messages[0]; m.Time.Before(before) || m.Time.After(time.Now().Add(2*time.Second)) {
		t.Fatalf("message time %v is not its SentTimestamp", m.Time)
	}
}
