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
	// Start is where a stream unit with no checkpoint begins.
	Start brokers.StartMode
	// Table is the records table (records mode); default Name.
	Table string
	// KeyField is the dotted path of the record key in a JSON message;
	// empty means the message key.
	KeyField string
	// MaxMessageBytes dead-letters bigger bodies (default 1 MiB).
	MaxMessageBytes int
	// Handler, when set, switches the source to handler mode: it receives
	// each batch inside the fenced transaction instead of records mode.
	Handler Handler
	// Schema declares field types for quality windows ("id:int, name:text").
	Schema string
	// BatchSize is the most messages per fetch (default 500).
	BatchSize int
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
	if s.Type == "" {
		s.Type = "memory"
	}
	sch, err := quality.ParseSchema(s.Schema)
	if err != nil {
		return s, fmt.Errorf("source %s: schema: %w", s.Name, err)
	}
	s.schema = sch
	dc := decode.Config{KeyField: s.KeyField, MaxBytes: s.MaxMessageBytes}
	if err := dc.Validate(); err != nil {
		return s, fmt.Errorf("source %s: %w", s.Name, err)
	}
	return s, nil
}

func (s *SourceSpec) isQueue() bool { return s.Queue != nil }

// Handler is a user function that applies a batch in handler mode. Its
// writes through tx share the batch's fenced transaction: they commit with
// the checkpoint or not at all. It returns nil (applied), an error made by
// Permanent for a message that can never be applied (that message is
// dead-lettered and the rest of the batch applied again), or any other error
// (nothing is applied; the failure is counted and the batch retried).
//
// Handlers with side effects outside the store get each batch at least
// once; Batch.IdempotencyKey identifies a retried batch.
type Handler func(ctx context.Context, tx persistence.Tx, b Batch) error

// Batch is what a Handler receives.
type Batch struct {
	Source string
	Unit   string
	// IdempotencyKey is "source/unit/first-position..last-position".
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
