package pubsub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	vkit "cloud.google.com/go/pubsub/v2/apiv1"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/internal/lifetime"
	"github.com/drover-dev/drover/brokers/internal/open"
	"github.com/drover-dev/drover/internal/exec"
)

// minPoll is the first pause between two Pulls while a Receive waits; it
// doubles up to Config.PollInterval.
const minPoll = 5 * time.Millisecond

// ackChunk caps the ack ids of one Acknowledge or ModifyAckDeadline
// request (the service limits a request to 512 KiB).
const ackChunk = 1000

// Queue is one Pub/Sub subscription read by competing receivers with
// unary Pull. It implements brokers.Queue and is safe for concurrent use.
type Queue struct {
	cfg  Config
	sub  string // full path
	cl   *vkit.SubscriptionAdminClient
	life lifetime.Life

	// ordered is set when the subscription delivers in ordering-key order.
	ordered bool

	mu     sync.Mutex
	closed bool
}

var _ brokers.Queue = (*Queue)(nil)

// NewQueue connects to Pub/Sub and checks that the subscription exists.
func NewQueue(ctx context.Context, cfg Config) (*Queue, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	opts, err := clientOptions(cfg)
	if err != nil {
		return nil, err
	}
	cl, err := vkit.NewSubscriptionAdminClient(ctx, opts...)
	if err != nil {
		return nil, translate("connect", err)
	}
	// drover retries on its own (the unit actor counts failures): calls
	// fail at once instead of retrying inside the client for a minute.
	cl.CallOptions.Pull = nil
	cl.CallOptions.Acknowledge = nil
	cl.CallOptions.ModifyAckDeadline = nil
	cl.CallOptions.GetSubscription = nil

	q := &Queue{cfg: cfg, sub: cfg.path(), cl: cl, life: lifetime.New(context.Background(), translate)}
	rctx, cancel := context.WithTimeout(ctx, cfg.RequestTimeout)
	defer cancel()
	s, err := cl.GetSubscription(rctx, &pubsubpb.GetSubscriptionRequest{Subscription: q.sub})
	if err != nil {
		_ = cl.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, translate("open subscription", fmt.Errorf("subscription %s: %w", q.sub, err))
	}
	q.ordered = s.GetEnableMessageOrdering()
	cfg.Logger.Debug("pubsub: subscription opened", "config", cfg, "ordered", q.ordered,
		"ack_deadline_seconds", s.GetAckDeadlineSeconds())
	return q, nil
}

// clientOptions builds the client's options from cfg. A credentials file
// is read only to learn its type; its contents go to the auth library and
// nowhere else.
func clientOptions(cfg Config) ([]option.ClientOption, error) {
	opts := []option.ClientOption{option.WithTelemetryDisabled()}
	if cfg.Endpoint != "" {
		opts = append(opts, option.WithEndpoint(cfg.Endpoint))
	}
	if cfg.Insecure {
		opts = append(opts,
			option.WithoutAuthentication(),
			option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	}
	if cfg.CredentialsFile != "" {
		typ, err := credentialsType(cfg.CredentialsFile)
		if err != nil {
			return nil, &brokers.Error{Op: "connect", Err: fmt.Errorf("CredentialsFile %q: %w", cfg.CredentialsFile, err)}
		}
		opts = append(opts, option.WithAuthCredentialsFile(typ, cfg.CredentialsFile))
	}
	return opts, nil
}

var credentialTypes = []option.CredentialsType{
	option.ServiceAccount,
	option.AuthorizedUser,
	option.ImpersonatedServiceAccount,
	option.ExternalAccount,
}

// credentialsType reads the "type" field of a credentials file. Errors
// never quote the file.
func credentialsType(path string) (option.CredentialsType, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", errors.New("cannot read the file")
	}
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return "", errors.New("not a JSON credentials file")
	}
	t := option.CredentialsType(head.Type)
	if !slices.Contains(credentialTypes, t) {
		return "", fmt.Errorf("credentials type %q is not one the adapter accepts", head.Type)
	}
	return t, nil
}

// Open returns a receiver for slot. Every receiver pulls from the same
// subscription; the service hands each message to one of them at a time.
func (q *Queue) Open(ctx context.Context, slot string) (brokers.Receiver, error) {
	return open.Receiver(q.OpenReceiver(ctx, slot))
}

// OpenReceiver is Open returning the concrete type.
func (q *Queue) OpenReceiver(ctx context.Context, slot string) (*Receiver, error) {
	return lifetime.Add(ctx, &q.mu, &q.closed, "open", func() *Receiver {
		return &Receiver{q: q, slot: slot, life: q.life.Child()}
	})
}

// Close closes every receiver and the client. Receives in flight return
// brokers.ErrClosed; messages not acked come back after their deadline.
// Closing twice is harmless.
func (q *Queue) Close() error {
	if !lifetime.Shut(&q.mu, &q.closed) {
		return nil
	}
	q.life.Close()
	if err := q.cl.Close(); err != nil {
		q.cfg.Logger.Debug("pubsub: close client", "err", err)
	}
	return nil
}

// ackID is a received message's Handle: the ack id of that delivery.
type ackID string

// Receiver is one consumer slot of a Queue. It implements brokers.Receiver
// and brokers.Extender.
type Receiver struct {
	q    *Queue
	slot string
	life lifetime.Life
}

var (
	_ brokers.Receiver = (*Receiver)(nil)
	_ brokers.Extender = (*Receiver)(nil)
)

// Receive pulls up to max messages (at most Config.MaxMessages), waiting up
// to wait for the first by pulling again after short pauses (see the
// package doc). Lag is -1: Pull does not tell the backlog.
func (r *Receiver) Receive(ctx context.Context, max int, wait time.Duration) (brokers.Result, error) {
	const op = "receive"
	if max <= 0 {
		return brokers.Result{}, &brokers.Error{Op: op, Err: fmt.Errorf("max %d must be positive", max)}
	}
	if err := r.life.Check(ctx, op); err != nil {
		return brokers.Result{}, err
	}
	octx, done := r.life.Op(ctx)
	defer done()
	req := &pubsubpb.PullRequest{
		Subscription:      r.q.sub,
		MaxMessages:       int32(min(max, r.q.cfg.MaxMessages)),
		ReturnImmediately: true, //nolint:staticcheck // see the package doc: we wait with our own re-polls
	}
	deadline := time.Now().Add(wait)
	var waited time.Duration
	pause := minPoll
	for {
		resp, err := r.pull(octx, req)
		if err != nil {
			return brokers.Result{}, r.life.Finish(ctx, op, err)
		}
		if len(resp.GetReceivedMessages()) > 0 {
			return r.result(resp.GetReceivedMessages()), nil
		}
		left := min(wait-waited, time.Until(deadline))
		if left <= 0 {
			return brokers.Result{Lag: -1}, nil
		}
		d := min(pause, left)
		t0 := time.Now()
		if err := exec.Wait(octx, d, nil); err != nil {
			return brokers.Result{}, r.life.Finish(ctx, op, err)
		}
		waited += d
		if time.Since(t0) < d/2 {
			// An executor that controls time recorded the pause and returned
			// at once: nothing else happens while this job runs, so record
			// the rest of the wait and look one last time.
			if rest := wait - waited; rest > 0 {
				if err := exec.Wait(octx, rest, nil); err != nil {
					return brokers.Result{}, r.life.Finish(ctx, op, err)
				}
			}
			waited, deadline = wait, time.Now()
		}
		pause = min(2*pause, r.q.cfg.PollInterval)
	}
}

func (r *Receiver) pull(ctx context.Context, req *pubsubpb.PullRequest) (*pubsubpb.PullResponse, error) {
	rctx, cancel := context.WithTimeout(ctx, r.q.cfg.RequestTimeout)
	defer cancel()
	return r.q.cl.Pull(rctx, req)
}

// result converts received messages in the order the service gave them.
func (r *Receiver) result(rms []*pubsubpb.ReceivedMessage) brokers.Result {
	res := brokers.Result{Messages: make([]brokers.Message, 0, len(rms)), Lag: -1}
	for _, rm := range rms {
		res.Messages = append(res.Messages, convert(rm, r.q.cfg.KeyAttribute))
	}
	return res
}

// ackIDs returns the ack ids of msgs, failing for one that did not come
// from a receiver of this package.
func ackIDs(op string, msgs []brokers.Message) ([]string, error) {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		id, ok := m.Handle.(ackID)
		if !ok {
			return nil, &brokers.Error{Op: op, Err: fmt.Errorf("message %q was not received from a pubsub queue", m.ID)}
		}
		out[i] = string(id)
	}
	return out, nil
}

// each runs call on the ack ids of msgs in chunks of at most ackChunk.
func (r *Receiver) each(ctx context.Context, op string, msgs []brokers.Message, call func(ctx context.Context, ids []string) error) error {
	if err := r.life.Check(ctx, op); err != nil {
		return err
	}
	ids, err := ackIDs(op, msgs)
	if err != nil {
		return err
	}
	octx, done := r.life.Op(ctx)
	defer done()
	for chunk := range slices.Chunk(ids, ackChunk) {
		rctx, cancel := context.WithTimeout(octx, r.q.cfg.RequestTimeout)
		err := call(rctx, chunk)
		cancel()
		if err != nil {
			return r.life.Finish(ctx, op, err)
		}
	}
	return nil
}

// Ack acknowledges msgs (Acknowledge). The runtime calls it only after the
// store committed. An ack id whose deadline passed is ignored by the
// service: that message comes back and the dedupe table refuses it.
func (r *Receiver) Ack(ctx context.Context, msgs []brokers.Message) error {
	return r.each(ctx, "ack", msgs, func(ctx context.Context, ids []string) error {
		return r.q.cl.Acknowledge(ctx, &pubsubpb.AcknowledgeRequest{Subscription: r.q.sub, AckIds: ids})
	})
}

// Nack gives msgs back: their ack deadline becomes delay from now
// (ModifyAckDeadline), so the service delivers them again after delay, at
// once for 0. The delay is rounded up to whole seconds and capped at
// MaxAckDeadline.
func (r *Receiver) Nack(ctx context.Context, msgs []brokers.Message, delay time.Duration) error {
	return r.modify(ctx, "nack", msgs, delay)
}

// Extend sets the ack deadline of msgs to d from now (ModifyAckDeadline),
// rounded up to whole seconds and capped at MaxAckDeadline; call it again
// to extend further.
func (r *Receiver) Extend(ctx context.Context, msgs []brokers.Message, d time.Duration) error {
	return r.modify(ctx, "extend", msgs, d)
}

func (r *Receiver) modify(ctx context.Context, op string, msgs []brokers.Message, d time.Duration) error {
	secs := deadlineSeconds(d)
	return r.each(ctx, op, msgs, func(ctx context.Context, ids []string) error {
		return r.q.cl.ModifyAckDeadline(ctx, &pubsubpb.ModifyAckDeadlineRequest{Subscription: r.q.sub, AckIds: ids, AckDeadlineSeconds: secs})
	})
}

// deadlineSeconds rounds d up to whole seconds within 0..MaxAckDeadline.
func deadlineSeconds(d time.Duration) int32 {
	d = min(max(d, 0), MaxAckDeadline)
	return int32((d + time.Second - 1) / time.Second)
}

// Close releases the receiver: a receive in flight returns ErrClosed; its
// unacknowledged messages come back after their deadline. Closing twice is
// harmless.
func (r *Receiver) Close() error {
	r.life.Close()
	return nil
}
