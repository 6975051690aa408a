package sqs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/brokers/internal/awsutil"
	"github.com/drover-dev/drover/brokers/internal/lifetime"
	"github.com/drover-dev/drover/brokers/internal/open"
)

// Operation names in the errors of this package (brokers.Error.Op).
const (
	OpOpen    = "open queue"
	OpReceive = "receive"
	OpAck     = "ack"
	OpNack    = "nack"
	OpExtend  = "extend"
)

// Queue is one SQS queue read by competing receivers. It implements
// brokers.Queue and is safe for concurrent use.
type Queue struct {
	cfg       Config
	client    *awssqs.Client
	transport *http.Transport
	url       string
	fifo      bool

	// ctx is cancelled by Close: every call in flight runs under a context
	// that ends with it.
	ctx    context.Context
	cancel context.CancelFunc
	calls  sync.WaitGroup

	mu     sync.Mutex
	closed bool
}

var _ brokers.Queue = (*Queue)(nil)

// NewQueue connects to the queue cfg names: it builds the client, resolves
// QueueName to a URL when needed, and checks that the queue exists (a
// *brokers.Error wrapping ErrQueueNotFound when it does not).
func NewQueue(ctx context.Context, cfg Config) (*Queue, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()

	loaded, err := awsutil.Load(ctx, awsutil.Settings{Region: cfg.Region, RegionHint: regionFromURL(cfg.QueueURL),
		AccessKeyID: cfg.AccessKeyID, SecretAccessKey: cfg.SecretAccessKey.Reveal(), SessionToken: cfg.SessionToken.Reveal(),
		ResponseHeaderTimeout: DefaultWaitTime + 15*time.Second})
	if err != nil {
		return nil, fmt.Errorf("sqs: %w", err)
	}
	awsCfg, tr, creds := loaded.Config, loaded.Transport, loaded.Credentials
	client := awssqs.NewFromConfig(awsCfg, func(o *awssqs.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
	})

	q := &Queue{cfg: cfg, client: client, transport: tr}
	q.ctx, q.cancel = context.WithCancel(context.Background())
	q.url = cfg.QueueURL
	if q.url == "" {
		in := &awssqs.GetQueueUrlInput{QueueName: aws.String(cfg.QueueName)}
		if cfg.QueueOwner != "" {
			in.QueueOwnerAWSAccountId = aws.String(cfg.QueueOwner)
		}
		out, err := client.GetQueueUrl(ctx, in)
		if err != nil {
			q.shutdown()
			return nil, fmt.Errorf("sqs: resolve queue %q: %w", cfg.QueueName, translate(OpOpen, err))
		}
		q.url = aws.ToString(out.QueueUrl)
	}
	attrs, err := client.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(q.url),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameFifoQueue},
	})
	if err != nil {
		q.shutdown()
		return nil, fmt.Errorf("sqs: queue %s: %w", q.url, translate(OpOpen, err))
	}
	q.fifo = attrs.Attributes[string(sqstypes.QueueAttributeNameFifoQueue)] == "true" || strings.HasSuffix(q.url, ".fifo")
	cfg.Logger.Info("sqs queue opened", "queue_url", q.url, "fifo", q.fifo, "region", awsCfg.Region,
		"endpoint", cfg.Endpoint, "credentials", creds)
	return q, nil
}

// Open returns a receiver for slot. Receivers compete for the queue's
// messages; SQS does not know slots, the name is only for drover.
func (q *Queue) Open(ctx context.Context, slot string) (brokers.Receiver, error) {
	return open.Receiver(q.OpenReceiver(ctx, slot))
}

// OpenReceiver is Open returning the concrete type.
func (q *Queue) OpenReceiver(ctx context.Context, slot string) (*Receiver, error) {
	return lifetime.Add(ctx, &q.mu, &q.closed, OpOpen, func() *Receiver {
		r := &Receiver{q: q, slot: slot}
		r.ctx, r.cancel = context.WithCancel(q.ctx)
		return r
	})
}

// Close closes the queue and every receiver: calls in flight (a long poll)
// are cancelled and return brokers.ErrClosed, and Close waits for them and
// closes idle connections. Messages received and not acknowledged come
// back after their visibility timeout. Closing twice is harmless.
func (q *Queue) Close() error {
	if lifetime.Shut(&q.mu, &q.closed) {
		q.shutdown()
	}
	return nil
}

func (q *Queue) shutdown() {
	q.cancel()
	q.calls.Wait()
	q.transport.CloseIdleConnections()
}

// begin starts a call of r: it fails when the queue or r is closed, and
// otherwise returns a context that ends with ctx or when either closes, and
// the function that ends the call.
func (r *Receiver) begin(ctx context.Context, op string) (context.Context, func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	q := r.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || r.closed {
		return nil, nil, &brokers.Error{Op: op, Err: brokers.ErrClosed}
	}
	cctx, end := awsutil.Begin(ctx, r.ctx, &q.calls)
	return cctx, end, nil
}

// newAttemptID returns a ReceiveRequestAttemptId for a FIFO receive.
func newAttemptID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
