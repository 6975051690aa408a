package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/drover-dev/drover/actors/decode"
	"github.com/drover-dev/drover/actors/quality"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/persistence"
)

// SourceSpec is one configured source as the runtime needs it: the broker
// already opened, and the tunables with their defaults applied.
type SourceSpec struct {
	// Name is unique in the cluster; unit ids are "<Name>/<partition>".
	Name string
	// Type is the broker kind shown in the tree: kafka, kinesis, sqs,
	// pubsub, nats, memory.
	Type string
	// Exactly one of Stream and Queue is set.
	Stream brokers.Stream
	Queue  brokers.Queue
	// Slots is the number of competing consumers of a queue (units
	// "<Name>/slot-0" ...). Default 1.
	Slots int
	// Start is where a stream unit of the source's first deployment begins
	// when it has no checkpoint. It is resolved once, on the unit's first
	// open, to a concrete position that is checkpointed before anything is
	// fetched; units that appear later (new partitions, child shards) start
	// at their earliest whatever Start says (architecture §7).
	Start brokers.StartMode
	// OnPositionReset says what a stream unit does when its checkpoint is
	// gone from the broker (retention) or unknown to it (beyond the end, an
	// earlier incarnation of the topic): ResetEarliest (the default) or
	// ResetLatest reset the checkpoint there by a fenced write and go on;
	// ResetFail keeps the unit retrying with the reason until an operator
	// moves the checkpoint.
	OnPositionReset ResetPolicy
	// Identity is what must be equal for two nodes to run the same source
	// (gossiped as a hash, so placement puts a unit only on members that run
	// its source). Default "<Name>/<Type>"; production adds what the source
	// reads (topic, stream, queue).
	Identity string
	// Table is the records table (records mode); default Name.
	Table string
	// KeyField is the dotted path of the record key in a JSON message;
	// empty means the message key.
	KeyField string
	// MaxMessageBytes dead-letters bigger bodies (default 1 MiB). It must
	// not exceed BatchBytes.
	MaxMessageBytes int
	// MaxDeadLetterBytes is the most bytes of a body a dead letter keeps
	// (default 256 KiB): a longer one is cut, the dead letter records the
	// body's whole size and cannot be replayed. It must not exceed
	// BatchBytes.
	MaxDeadLetterBytes int
	// Format is how message bodies are written (decode.format): JSON (""),
	// or a Confluent wire format whose schemas Registry fetches. A unit
	// resolves the schemas of a fetch in the fetch's job; when the
	// registry cannot be asked the unit retries (the fetch is read again),
	// nothing is dead-lettered for it. Records mode only.
	Format   decode.Format
	Registry *decode.Registry
	// Handler, when set, switches the source to handler mode: it receives
	// each batch inside the fenced transaction instead of records mode.
	Handler Handler
	// Schema declares field types for quality windows ("id:int, name:text").
	Schema string
	// BatchSize is the most messages per fetch (default 500).
	BatchSize int
	// BatchBytes bounds a batch by bytes as well (default 16 MiB): the
	// messages of a fetch are applied in batches that carry at most that
	// many bytes (persistence.Op.Size: documents, payloads, keys,
	// reasons), one after the other, in order, each with its own
	// checkpoint. A message bigger than BatchBytes on its own (possible
	// only for a dead letter's reason and keys on top of its cut payload)
	// is a batch of its own.
	BatchBytes int
	// MaxWait is the longest a fetch waits for its first message (default 1 s).
	MaxWait time.Duration
	// MaxConsecutiveFailures fails the unit to its supervisor (default 5).
	MaxConsecutiveFailures int
	// LeaseTTL is the lease duration; it is renewed every third of it
	// (default 10 s).
	LeaseTTL time.Duration
	// Discovery is how often partitions are listed again (default 30 s).
	Discovery time.Duration
	// NackDelay is the redelivery delay of queue messages given back after
	// a failed apply (default 1 s).
	NackDelay time.Duration
	// AckDeadline is the queue's visibility timeout or ack deadline (SQS
	// visibility timeout, Pub/Sub ack deadline, JetStream AckWait). While a
	// batch is in flight the unit extends it every third of AckDeadline
	// (brokers.Extender), so a slow apply or handler is never delivered
	// again elsewhere. Default 10 s (Pub/Sub's default, the shortest).
	AckDeadline time.Duration

	schema quality.Schema // parsed Schema
}

// withDefaults returns the spec with zero values replaced by defaults, or
// an error naming what is wrong.
func (s SourceSpec) withDefaults() (SourceSpec, error) {
	if s.Name == "" {
		return s, errors.New("source: name required")
	}
	if (s.Stream == nil) == (s.Queue == nil) {
		return s, fmt.Errorf("source %s: exactly one of stream and queue must be set", s.Name)
	}
	if s.Slots <= 0 {
		s.Slots = 1
	}
	if s.Type == "" {
		s.Type = "memory"
	}
	if s.Table == "" {
		s.Table = s.Name
	}
	if s.Handler == nil {
		if err := persistence.ValidTable(s.Table); err != nil {
			return s, fmt.Errorf("source %s: %w", s.Name, err)
		}
	}
	if s.MaxMessageBytes <= 0 {
		s.MaxMessageBytes = 1 << 20
	}
	if s.BatchSize <= 0 {
		s.BatchSize = 500
	}
	if s.BatchBytes <= 0 {
		s.BatchBytes = DefaultBatchBytes
	}
	if s.MaxDeadLetterBytes <= 0 {
		s.MaxDeadLetterBytes = decode.DefaultMaxDeadLetterBytes
	}
	if s.MaxMessageBytes > s.BatchBytes {
		return s, fmt.Errorf("source %s: max message bytes %d exceed batch bytes %d: a message would not fit a batch", s.Name, s.MaxMessageBytes, s.BatchBytes)
	}
	if s.MaxDeadLetterBytes > s.BatchBytes {
		return s, fmt.Errorf("source %s: max dead-letter bytes %d exceed batch bytes %d: a dead letter would not fit a batch", s.Name, s.MaxDeadLetterBytes, s.BatchBytes)
	}
	if s.MaxWait <= 0 {
		s.MaxWait = time.Second
	}
	if s.MaxConsecutiveFailures <= 0 {
		s.MaxConsecutiveFailures = 5
	}
	if s.LeaseTTL <= 0 {
		s.LeaseTTL = 10 * time.Second
	}
	if s.Discovery <= 0 {
		s.Discovery = 30 * time.Second
	}
	if s.NackDelay <= 0 {
		s.NackDelay = time.Second
	}
	if s.AckDeadline <= 0 {
		s.AckDeadline = 10 * time.Second
	}
	if s.Identity == "" {
		s.Identity = s.Name + "/" + s.Type
	}
	switch s.OnPositionReset {
	case ResetEarliest, ResetLatest, ResetFail:
	default:
		return s, fmt.Errorf("source %s: on_position_reset %d: unknown", s.Name, s.OnPositionReset)
	}
	sch, err := quality.ParseSchema(s.Schema)
	if err != nil {
		return s, fmt.Errorf("source %s: schema: %w", s.Name, err)
	}
	s.schema = sch
	dc := s.decodeConfig()
	if s.Handler != nil && dc.Format != "" && dc.Format != decode.FormatJSON {
		return s, fmt.Errorf("source %s: decode format %s applies to records mode, not to a handler", s.Name, dc.Format)
	}
	if err := dc.Validate(); err != nil {
		return s, fmt.Errorf("source %s: %w", s.Name, err)
	}
	return s, nil
}

func (s *SourceSpec) isQueue() bool { return s.Queue != nil }

// DefaultBatchBytes is SourceSpec.BatchBytes when it is 0: 16 MiB.
const DefaultBatchBytes = 16 << 20

// decodeConfig is how the source's messages are decoded.
func (s *SourceSpec) decodeConfig() decode.Config {
	return decode.Config{KeyField: s.KeyField, MaxBytes: s.MaxMessageBytes, MaxDeadLetterBytes: s.MaxDeadLetterBytes,
		Format: s.Format, Registry: s.Registry}
}

// ResetPolicy is what a stream unit does when its checkpoint is no longer a
// position of the broker (SourceSpec.OnPositionReset).
type ResetPolicy int

const (
	// ResetEarliest resets the checkpoint to the earliest message held.
	ResetEarliest ResetPolicy = iota
	// ResetLatest resets it to the newest message (skipping what is there).
	ResetLatest
	// ResetFail leaves the checkpoint alone and keeps the unit retrying
	// with the reason until an operator moves the checkpoint.
	ResetFail
)

func (p ResetPolicy) String() string {
	switch p {
	case ResetEarliest:
		return "earliest"
	case ResetLatest:
		return "latest"
	case ResetFail:
		return "fail"
	}
	return fmt.Sprintf("ResetPolicy(%d)", int(p))
}

// Handler is a user function that applies a batch in handler mode. Its
// writes through tx share the batch's fenced transaction: they commit with
// the checkpoint or not at all. It returns nil (applied), an error made by
// Permanent for a message that can never be applied (that message is
// dead-lettered and the rest of the batch applied again), an error the
// store classifies permanent (persistence.ErrPermanent, such as the
// store's refusal of a Put that violates a constraint, returned as is or
// wrapped with %w: the batch is split and the messages it fails for alone
// are dead-lettered with the store's message, as in records mode), or any
// other error (nothing is applied; the failure is counted and the batch
// retried).
//
// Handlers with side effects outside the store get each batch at least
// once; Batch.IdempotencyKey identifies a retried batch.
type Handler func(ctx context.Context, tx persistence.Tx, b Batch) error

// Batch is what a Handler receives.
type Batch struct {
	Source string
	Unit   string
	// IdempotencyKey is "<unit>/<first position>..<last position>" over the
	// messages of the batch (persistence.Batch.IdempotencyKey; the unit id
	// is "<source>/<partition>"): a fetch, or each of the batches a fetch
	// larger than SourceSpec.BatchBytes is cut into. A batch that failed is
	// retried as the very same batch while its unit runs, so its retries
	// carry the same key; a batch the store refused for good is split in
	// two, each half with its own key. After the unit restarts or moves, messages are fetched again
	// and may be batched with other bounds: a handler with outside side
	// effects that must happen once keys them by message position (streams)
	// or message id (queues), which never change.
	IdempotencyKey string
	// Node applies the batch holding the unit's lease with Token, the
	// fencing token: it strictly increases each time the unit changes
	// hands, so an outside system can refuse writes older than the newest
	// token it has seen.
	Node  string
	Token int64
	// Messages in unit order, duplicates already removed (queues).
	Messages []brokers.Message
}

// PermanentError marks one message of a batch as never applicable.
type PermanentError struct {
	Position string // the message's Position
	Err      error
}

func (e *PermanentError) Error() string {
	return fmt.Sprintf("message %s: %v", e.Position, e.Err)
}

func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent returns the error a Handler returns when m can never be applied.
func Permanent(m brokers.Message, err error) error {
	return &PermanentError{Position: m.Position, Err: err}
}
