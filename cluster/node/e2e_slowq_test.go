package node_test

// Issue 9, item 9: a handler slower than the queue's deadline, on each real
// queue server. One node runs a handler-mode source with 2 slots (two
// competing receivers of one queue) on PostgreSQL, so that both slots
// apply at the same time: while one slot's handler holds a batch for 3×
// the broker's visibility timeout / ack deadline, the other keeps
// receiving and would get that batch again if the unit did not extend its
// deadline (actors: startExtend, brokers.Extender). Checked:
//
//   - every message is applied exactly once: the handler writes each
//     message id it applies into slow_applied inside the transaction;
//   - no message is delivered twice: Message.Deliveries is 1 for every
//     handled message, the node received exactly as many messages as were
//     sent (the units' Received counters), and the broker's own counters
//     say so (SQS: the ReceiveMessage answers seen by a proxy in front of
//     fauxqs; Pub/Sub: pstest's delivery count; NATS: the consumer's
//     delivered sequence and the ack subjects);
//   - the extension happened: the broker saw at least as many extensions
//     of every slow message as deadlines its handler outlasted;
//   - the queue is fully acked at the end.
//
// The same runs with the extension switched off (mutate.NoExtend,
// e2e_slowq_mutate_test.go, -tags drover_mutate) must report problems.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/jackc/pgx/v5"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/actors"
	"github.com/drover-dev/drover/brokers/awstest"
	"github.com/drover-dev/drover/cluster/config"
	"github.com/drover-dev/drover/cluster/node"
	"github.com/drover-dev/drover/internal/syncbuf"
	"github.com/drover-dev/drover/persistence"
	"github.com/drover-dev/drover/persistence/stores"
)

const (
	// slowMessages are sent to each queue; slowBatchSize is the source's
	// batch_size, so a slow message holds a few others with it.
	slowMessages  = 30
	slowBatchSize = 5
	// slowFactor: a slow batch's handler takes this many deadlines.
	slowFactor = 3
	// slowIndex is the one slow message. One, so that one slot at a time
	// is slow and the other keeps receiving (two slow batches at once
	// would leave no receiver to be handed a redelivery).
	slowIndex  = 1
	slowTable  = "slow_applied"
	slowSource = "slow"
)

// slowQueue is one queue server's part of a slow-handler run.
type slowQueue struct {
	Type    string // the source's type
	Section string // its type section (YAML lines without indentation)
	// Deadline is the broker's visibility timeout / ack deadline.
	Deadline time.Duration
	// StoreTimeout is store.timeout: above a slow batch's handler time,
	// since PostgreSQL ends a transaction idle for that long.
	StoreTimeout time.Duration
	// Send publishes the bodies in order and returns the message ids the
	// source will see.
	Send func(ctx context.Context, bodies [][]byte) ([]string, error)
	// Acked reports whether the broker holds nothing unacked.
	Acked func(ctx context.Context) (bool, string)
	// Broker checks the broker's own counters: every message delivered
	// once, every slow message extended at least min times.
	Broker func(ctx context.Context, ids []string, slow map[string]bool, min int) []string
}

// slowHandler writes every message it applies into slowTable and waits
// wait in a batch holding a slow message.
type slowHandler struct {
	wait time.Duration
	mu   sync.Mutex
	took []time.Duration // of the slow batches that waited to the end
}

func (h *slowHandler) handle(ctx context.Context, tx persistence.Tx, b actors.Batch) error {
	slow := false
	for _, m := range b.Messages {
		if _, err := tx.Exec(ctx, "INSERT INTO "+slowTable+" (unit, id, deliveries, token) VALUES ($1, $2, $3, $4)",
			b.Unit, m.ID, m.Deliveries, b.Token); err != nil {
			return fmt.Errorf("slow handler: insert: %w", err)
		}
		slow = slow || bytes.Contains(m.Value, []byte(`"slow":true`))
	}
	if !slow {
		return nil
	}
	// the handler's own work takes this long (not a synchronisation)
	began := time.Now()
	t := time.NewTimer(h.wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	h.mu.Lock()
	h.took = append(h.took, time.Since(began))
	h.mu.Unlock()
	return nil
}

// slowRow is one row of slowTable.
type slowRow struct {
	Unit, ID          string
	Deliveries, Token int64
}

func slowRows(ctx context.Context, storeURL string) ([]slowRow, error) {
	var out []slowRow
	err := stores.Query(ctx, storeURL, "SELECT unit, id, deliveries, token FROM "+slowTable, nil, func(scan func(...any) error) error {
		var r slowRow
		if err := scan(&r.Unit, &r.ID, &r.Deliveries, &r.Token); err != nil {
			return err
		}
		out = append(out, r)
		return nil
	})
	return out, err
}

// runSlowQueue runs one node with the slow handler on q until every
// message is applied and acked (or 2 minutes pass), shuts it down, and
// returns what is wrong. It fails t only when the run cannot be set up.
func runSlowQueue(t *testing.T, q slowQueue) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	storeURL := e2ePG.URL(t)
	conn, err := pgx.Connect(ctx, storeURL)
	if err != nil {
		t.Fatalf("connect to the store: %v", err)
	}
	// created before the node starts: two slots' first transactions
	// creating it at once would make one fail
	_, err = conn.Exec(ctx, "CREATE TABLE "+slowTable+" (unit text NOT NULL, id text NOT NULL, deliveries bigint NOT NULL, token bigint NOT NULL)")
	conn.Close(ctx)
	if err != nil {
		t.Fatalf("create %s: %v", slowTable, err)
	}

	bodies := make([][]byte, slowMessages)
	isSlow := func(i int) bool { return i == slowIndex }
	for i := range bodies {
		bodies[i] = []byte(fmt.Sprintf(`{"id":%d,"slow":%t}`, i, isSlow(i)))
	}
	ids, err := q.Send(ctx, bodies)
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	if len(ids) != slowMessages {
		t.Fatalf("send: %d ids for %d messages", len(ids), slowMessages)
	}
	slow := map[string]bool{}
	for i, id := range ids {
		if isSlow(i) {
			slow[id] = true
		}
	}
	if len(slow) != 1 {
		t.Fatalf("%d slow messages, want 1", len(slow))
	}

	h := &slowHandler{wait: slowFactor * q.Deadline}
	yaml := fmt.Sprintf(`node:
  name: slow-node
  debug_addr: 127.0.0.1:0
cluster:
  bind: 127.0.0.1:0
store:
  url: %q
  timeout: %s
sources:
  - name: %s
    type: %s
    mode: handler
    handler_name: slow
    slots: 2
    batch_size: %d
    max_wait: 200ms
    %s:
`, storeURL, q.StoreTimeout, slowSource, q.Type, slowBatchSize, q.Type)
	for _, l := range strings.Split(strings.TrimSpace(q.Section), "\n") {
		yaml += "      " + l + "\n"
	}
	cfg, err := config.Parse([]byte(yaml), config.Options{})
	if err != nil {
		t.Fatalf("config: %v\n%s", err, yaml)
	}
	logs := &syncbuf.Buffer{}
	t.Cleanup(func() {
		if t.Failed() {
			l := logs.String()
			if len(l) > 16<<10 {
				l = "…" + l[len(l)-16<<10:]
			}
			t.Logf("node logs (tail):\n%s", l)
		}
	})
	began := time.Now()
	n, err := node.Start(ctx, cfg, node.Options{
		Logger:   slog.New(slog.NewTextHandler(logs, nil)),
		Handlers: map[string]actors.Handler{"slow": h.handle},
	})
	if err != nil {
		t.Fatalf("start the node: %v", err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			n.Close()
		}
	})

	var problems []string
	err = e2eWaitFor(ctx, 100*time.Millisecond, 2*time.Minute, func() (bool, string) {
		rows, err := slowRows(ctx, storeURL)
		if err != nil {
			return false, err.Error()
		}
		got := map[string]bool{}
		for _, r := range rows {
			got[r.ID] = true
		}
		if len(got) < len(ids) {
			return false, fmt.Sprintf("%d of %d message ids applied", len(got), len(ids))
		}
		return q.Acked(ctx)
	})
	if err != nil {
		problems = append(problems, fmt.Sprintf("not every message applied and acked: %v", err))
	}
	t.Logf("applied and acked in %v", time.Since(began).Round(time.Millisecond))

	var received, restarts int64
	for _, s := range n.Tree().Sources {
		if s.Name != slowSource {
			continue
		}
		for _, u := range s.Units {
			received += u.Received
			restarts += u.Restarts
		}
	}
	sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
	closed = true
	if err := n.Shutdown(sctx); err != nil {
		problems = append(problems, fmt.Sprintf("graceful shutdown: %v", err))
	}
	scancel()

	// applied exactly once, each on its first delivery
	rows, err := slowRows(ctx, storeURL)
	if err != nil {
		t.Fatalf("read %s: %v", slowTable, err)
	}
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	count := map[string]int{}
	var redelivered, unknown []string
	for _, r := range rows {
		count[r.ID]++
		if !want[r.ID] {
			unknown = append(unknown, r.ID)
		}
		if r.Deliveries != 1 {
			redelivered = append(redelivered, fmt.Sprintf("%s (delivery %d, %s)", r.ID, r.Deliveries, r.Unit))
		}
	}
	var lost, twice []string
	for _, id := range ids {
		switch count[id] {
		case 0:
			lost = append(lost, id)
		case 1:
		default:
			twice = append(twice, fmt.Sprintf("%s ×%d", id, count[id]))
		}
	}
	for _, p := range []struct {
		what string
		ids  []string
	}{{"never applied", lost}, {"applied more than once", twice}, {"applied but never sent", unknown},
		{"handled on a later delivery (Message.Deliveries != 1)", redelivered}} {
		if len(p.ids) > 0 {
			sort.Strings(p.ids)
			problems = append(problems, fmt.Sprintf("%d messages %s, e.g. %v", len(p.ids), p.what, p.ids[:min(5, len(p.ids))]))
		}
	}

	// the slow path ran, and nothing came from the broker twice
	h.mu.Lock()
	took := append([]time.Duration(nil), h.took...)
	h.mu.Unlock()
	if len(took) == 0 {
		problems = append(problems, "no slow batch ran to its end: the deadline was never outlasted")
	}
	t.Logf("slow batches took %v (deadline %v); the node received %d messages for %d sent, %d unit restarts",
		took, q.Deadline, received, len(ids), restarts)
	if received != int64(len(ids)) {
		problems = append(problems, fmt.Sprintf("the node received %d messages for %d sent: %d deliveries more than one per message",
			received, len(ids), received-int64(len(ids))))
	}
	problems = append(problems, q.Broker(ctx, ids, slow, slowFactor)...)
	if ok, why := q.Acked(ctx); !ok {
		problems = append(problems, "after the shutdown the queue is not fully acked: "+why)
	}
	return problems
}

func reportSlow(t *testing.T, problems []string) {
	t.Helper()
	for _, p := range problems {
		t.Error(p)
	}
}

func TestE2ESlowHandlerSQS(t *testing.T)    { reportSlow(t, slowSQS(t)) }
func TestE2ESlowHandlerPubSub(t *testing.T) { reportSlow(t, slowPubSub(t)) }
func TestE2ESlowHandlerNATS(t *testing.T)   { reportSlow(t, slowNATS(t)) }

// ---- SQS (fauxqs), visibility timeout 2 s, through a counting proxy ----

func slowSQS(t *testing.T) []string {
	ep := e2eSQS.Endpoint(t)
	c := awstest.SQSClient(ep, true)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const visibility = 2 * time.Second
	name := fmt.Sprintf("drover-slow-%d-%d", os.Getpid(), time.Now().UnixNano())
	qurl := e2eSQSQueue(ctx, t, c, name, int(visibility/time.Second))
	px := newSQSCounter(t, ep)
	t.Setenv(e2eAWSSecretEnv, awstest.SecretAccessKey)
	return runSlowQueue(t, slowQueue{
		Type: "sqs",
		Section: fmt.Sprintf("queue_url: %q\nregion: %s\nendpoint: %q\nwait: 1s\nvisibility_timeout: %s\naccess_key_id: %s\nsecret_access_key: \"${env:%s}\"",
			qurl, awstest.Region, px.url, visibility, awstest.AccessKeyID, e2eAWSSecretEnv),
		Deadline: visibility, StoreTimeout: 20 * time.Second,
		Send: func(ctx context.Context, bodies [][]byte) ([]string, error) {
			ids := make([]string, 0, len(bodies))
			for _, b := range bodies { // one at a time: the ids in send order
				r, err := c.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: aws.String(qurl), MessageBody: aws.String(string(b))})
				if err != nil {
					return nil, err
				}
				ids = append(ids, aws.ToString(r.MessageId))
			}
			return ids, nil
		},
		Acked: func(ctx context.Context) (bool, string) {
			visible, inFlight, err := e2eSQSCounts(ctx, c, qurl)
			if err != nil {
				return false, err.Error()
			}
			return visible == "0" && inFlight == "0", fmt.Sprintf("%s messages waiting, %s in flight", visible, inFlight)
		},
		Broker: px.check,
	})
}

// sqsCounter is a reverse proxy in front of the SQS server that counts,
// per message id, the ReceiveMessage answers that carried it and the
// ChangeMessageVisibility(Batch) entries that named one of its receipt
// handles.
type sqsCounter struct {
	t   *testing.T
	url string

	mu       sync.Mutex
	byHandle map[string]string // receipt handle -> message id
	received map[string]int
	extended map[string]int // visibility changes to a non-zero timeout
	errs     []string
}

func newSQSCounter(t *testing.T, endpoint string) *sqsCounter {
	t.Helper()
	target, err := url.Parse(endpoint)
	if err != nil {
		t.Fatalf("SQS endpoint %q: %v", endpoint, err)
	}
	c := &sqsCounter{t: t, byHandle: map[string]string{}, received: map[string]int{}, extended: map[string]int{}}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host // as signed
			pr.Out.Header.Del("Accept-Encoding")
		},
		ModifyResponse: func(resp *http.Response) error {
			if !strings.HasSuffix(resp.Request.Header.Get("X-Amz-Target"), ".ReceiveMessage") || resp.StatusCode != http.StatusOK {
				return nil
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				return err
			}
			resp.Body = io.NopCloser(bytes.NewReader(body))
			c.sawReceive(body)
			return nil
		},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		target := r.Header.Get("X-Amz-Target")
		if strings.HasSuffix(target, ".ChangeMessageVisibilityBatch") || strings.HasSuffix(target, ".ChangeMessageVisibility") {
			c.sawChange(body)
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c.url = srv.URL
	return c
}

func (c *sqsCounter) sawReceive(body []byte) {
	var out struct {
		Messages []struct{ MessageId, ReceiptHandle string }
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := json.Unmarshal(body, &out); err != nil {
		c.errs = append(c.errs, "ReceiveMessage answer: "+err.Error())
		return
	}
	for _, m := range out.Messages {
		c.received[m.MessageId]++
		c.byHandle[m.ReceiptHandle] = m.MessageId
	}
}

func (c *sqsCounter) sawChange(body []byte) {
	type entry struct {
		ReceiptHandle     string
		VisibilityTimeout int
	}
	var in struct {
		Entries []entry
		entry
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := json.Unmarshal(body, &in); err != nil {
		c.errs = append(c.errs, "ChangeMessageVisibility request: "+err.Error())
		return
	}
	if in.ReceiptHandle != "" {
		in.Entries = append(in.Entries, in.entry)
	}
	for _, e := range in.Entries {
		if id, ok := c.byHandle[e.ReceiptHandle]; ok && e.VisibilityTimeout > 0 {
			c.extended[id]++
		}
	}
}

func (c *sqsCounter) check(_ context.Context, ids []string, slow map[string]bool, min int) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var problems []string
	problems = append(problems, c.errs...)
	var twice, never, short []string
	for _, id := range ids {
		switch n := c.received[id]; {
		case n == 0:
			never = append(never, id)
		case n > 1:
			twice = append(twice, fmt.Sprintf("%s ×%d", id, n))
		}
		if slow[id] && c.extended[id] < min {
			short = append(short, fmt.Sprintf("%s extended %d times", id, c.extended[id]))
		}
	}
	if len(never) > 0 {
		problems = append(problems, fmt.Sprintf("SQS: %d messages never seen in a ReceiveMessage answer, e.g. %v", len(never), never[:1]))
	}
	if len(twice) > 0 {
		problems = append(problems, fmt.Sprintf("SQS: %d messages received more than once, e.g. %v", len(twice), twice[:1]))
	}
	if len(short) > 0 {
		problems = append(problems, fmt.Sprintf("SQS: slow messages given fewer than %d visibility extensions: %v", min, short))
	}
	ext := 0
	for _, n := range c.extended {
		ext += n
	}
	c.t.Logf("SQS: %d visibility extensions seen", ext)
	return problems
}

// ---- Pub/Sub (pstest), ack deadline 10 s (the service's minimum) ----

func slowPubSub(t *testing.T) []string {
	const (
		project  = "drover-slow"
		topic    = "projects/" + project + "/topics/slow"
		dlTopic  = "projects/" + project + "/topics/slow-dead"
		sub      = "slow"
		deadline = 10 * time.Second
	)
	srv := pstest.NewServer()
	t.Cleanup(func() { _ = srv.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tp := range []string{topic, dlTopic} {
		if _, err := srv.GServer.CreateTopic(ctx, &pubsubpb.Topic{Name: tp}); err != nil {
			t.Fatalf("create topic %s: %v", tp, err)
		}
	}
	// The dead-letter policy makes the service count delivery attempts
	// (Message.Deliveries); a message delivered 5 times is moved to
	// dlTopic without ever being acked, which is what the extension keeps
	// from happening to a slow batch.
	if _, err := srv.GServer.CreateSubscription(ctx, &pubsubpb.Subscription{
		Name: "projects/" + project + "/subscriptions/" + sub, Topic: topic, AckDeadlineSeconds: int32(deadline / time.Second),
		DeadLetterPolicy: &pubsubpb.DeadLetterPolicy{DeadLetterTopic: dlTopic, MaxDeliveryAttempts: 5},
	}); err != nil {
		t.Fatalf("create subscription: %v", err)
	}
	return runSlowQueue(t, slowQueue{
		Type:     "pubsub",
		Section:  fmt.Sprintf("project: %s\nsubscription: %s\nendpoint: %q", project, sub, srv.Addr),
		Deadline: deadline, StoreTimeout: 60 * time.Second,
		Send: func(_ context.Context, bodies [][]byte) ([]string, error) {
			ids := make([]string, len(bodies))
			for i, b := range bodies {
				ids[i] = srv.Publish(topic, b, nil)
			}
			return ids, nil
		},
		// pstest counts an ack of a message's current delivery only
		Acked: func(context.Context) (bool, string) {
			unacked, example := 0, ""
			for _, m := range srv.Messages() {
				if m.Topic == topic && m.Acks == 0 {
					unacked++
					example = m.ID
				}
			}
			return unacked == 0, fmt.Sprintf("%d messages not acked, e.g. %s", unacked, example)
		},
		Broker: func(_ context.Context, ids []string, slow map[string]bool, min int) []string {
			var problems, twice, short, dead []string
			byID := map[string]*pstest.Message{}
			for _, m := range srv.Messages() {
				byID[m.ID] = m
				if m.Topic == dlTopic {
					dead = append(dead, m.ID)
				}
			}
			modacks := 0
			for _, id := range ids {
				m := byID[id]
				if m == nil {
					problems = append(problems, "pstest does not know message "+id)
					continue
				}
				if m.Deliveries != 1 || m.Acks != 1 {
					twice = append(twice, fmt.Sprintf("%s delivered %d times, acked %d times", id, m.Deliveries, m.Acks))
				}
				ext := 0
				for _, ma := range m.Modacks {
					if ma.AckDeadline > 0 {
						ext++
					}
				}
				modacks += ext
				if slow[id] && ext < min {
					short = append(short, fmt.Sprintf("%s extended %d times", id, ext))
				}
			}
			if len(twice) > 0 {
				sort.Strings(twice)
				problems = append(problems, fmt.Sprintf("Pub/Sub: %d messages not delivered and acked exactly once, e.g. %v", len(twice), twice[:1]))
			}
			if len(short) > 0 {
				problems = append(problems, fmt.Sprintf("Pub/Sub: slow messages given fewer than %d ModifyAckDeadline extensions: %v", min, short))
			}
			if len(dead) > 0 {
				problems = append(problems, fmt.Sprintf("Pub/Sub: %d messages moved to the dead-letter topic, e.g. %v", len(dead), dead[:1]))
			}
			t.Logf("Pub/Sub: %d ModifyAckDeadline extensions seen", modacks)
			return problems
		},
	})
}

// ---- NATS JetStream queue (embedded server), ack_wait 2 s ----

func slowNATS(t *testing.T) []string {
	const (
		stream   = "SLOWQ"
		subject  = "slowq"
		consumer = "slow"
		ackWait  = 2 * time.Second
	)
	u, nc, js := e2eJetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{subject}, Retention: jetstream.LimitsPolicy})
	if err != nil {
		t.Fatalf("create stream: %v", err)
	}
	created := strconv.FormatInt(st.CachedInfo().Created.UnixNano(), 10)

	// Every ack a client sends is a message on the delivery's reply
	// subject, "$JS.ACK.<stream>.<consumer>.<delivery count>.<stream
	// seq>...", which a plain subscription sees too: in-progress acks
	// (+WPI) are the extensions, and a delivery count above 1 a
	// redelivery.
	var (
		ackMu    sync.Mutex
		wpi      = map[string]int{} // stream seq -> in-progress acks
		acks     = map[string]int{} // stream seq -> acks
		laterAck []string           // acks of a delivery after the first
	)
	sub, err := nc.Subscribe("$JS.ACK.>", func(m *natsgo.Msg) {
		tok := strings.Split(m.Subject, ".")
		for i := 2; i+3 < len(tok); i++ {
			if tok[i] != stream || tok[i+1] != consumer {
				continue
			}
			seq := tok[i+3]
			ackMu.Lock()
			switch {
			case bytes.HasPrefix(m.Data, []byte("+WPI")):
				wpi[seq]++
			case len(m.Data) == 0 || bytes.HasPrefix(m.Data, []byte("+ACK")):
				acks[seq]++
				if tok[i+2] != "1" {
					laterAck = append(laterAck, fmt.Sprintf("seq %s on delivery %s", seq, tok[i+2]))
				}
			}
			ackMu.Unlock()
			return
		}
	})
	if err != nil {
		t.Fatalf("subscribe to the ack subjects: %v", err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	seqOf := func(id string) string { return id[strings.LastIndexByte(id, ':')+1:] }
	return runSlowQueue(t, slowQueue{
		Type:     "nats",
		Section:  fmt.Sprintf("url: %q\nstream: %s\nmode: queue\nconsumer: %s\nack_wait: %s", u, stream, consumer, ackWait),
		Deadline: ackWait, StoreTimeout: 20 * time.Second,
		Send: func(ctx context.Context, bodies [][]byte) ([]string, error) {
			ids := make([]string, len(bodies))
			for i, b := range bodies {
				ack, err := js.Publish(ctx, subject, b)
				if err != nil {
					return nil, err
				}
				ids[i] = stream + ":" + created + ":" + strconv.FormatUint(ack.Sequence, 10)
			}
			return ids, nil
		},
		Acked: func(ctx context.Context) (bool, string) {
			c, err := js.Consumer(ctx, stream, consumer)
			if err != nil {
				return false, fmt.Sprintf("consumer %s: %v", consumer, err)
			}
			info, err := c.Info(ctx)
			if err != nil {
				return false, fmt.Sprintf("consumer %s: %v", consumer, err)
			}
			return info.NumPending == 0 && info.NumAckPending == 0 && info.AckFloor.Stream == slowMessages,
				fmt.Sprintf("%d pending, %d ack pending, ack floor %d of %d", info.NumPending, info.NumAckPending, info.AckFloor.Stream, slowMessages)
		},
		Broker: func(ctx context.Context, ids []string, slow map[string]bool, min int) []string {
			var problems []string
			c, err := js.Consumer(ctx, stream, consumer)
			if err != nil {
				return []string{fmt.Sprintf("consumer %s: %v", consumer, err)}
			}
			info, err := c.Info(ctx)
			if err != nil {
				return []string{fmt.Sprintf("consumer %s: %v", consumer, err)}
			}
			// the consumer sequence counts every delivery, redeliveries too
			if info.Delivered.Consumer != uint64(len(ids)) || info.NumRedelivered != 0 {
				problems = append(problems, fmt.Sprintf("NATS: the consumer made %d deliveries of %d messages (%d redelivered pending)",
					info.Delivered.Consumer, len(ids), info.NumRedelivered))
			}
			ackMu.Lock()
			defer ackMu.Unlock()
			if len(laterAck) > 0 {
				problems = append(problems, fmt.Sprintf("NATS: %d acks of a redelivery, e.g. %v", len(laterAck), laterAck[:1]))
			}
			var short []string
			total := 0
			for _, n := range wpi {
				total += n
			}
			for _, id := range ids {
				if slow[id] && wpi[seqOf(id)] < min {
					short = append(short, fmt.Sprintf("%s extended %d times", id, wpi[seqOf(id)]))
				}
			}
			if len(short) > 0 {
				problems = append(problems, fmt.Sprintf("NATS: slow messages given fewer than %d in-progress acks: %v", min, short))
			}
			t.Logf("NATS: %d in-progress acks, %d acks seen", total, len(acks))
			return problems
		},
	})
}
