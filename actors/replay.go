package actors

import (
	"context"
	"errors"
	"fmt"

	"github.com/drover-dev/drover/actors/decode"
	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/persistence"
)

// ReplayResult says what a replay did.
type ReplayResult struct {
	// Applied is true when the message went into the store (or handler)
	// and the dead letter is marked replayed.
	Applied bool
	// Reason is why it was dead-lettered again (Applied false): the dead
	// letter stays pending with one more attempt.
	Reason string
}

// ErrNotReplayable is returned for a dead letter that is not pending, of
// another source, or whose payload was cut (persistence.DeadLetter.Cut).
var ErrNotReplayable = errors.New("dead letter cannot be replayed")

// ReplayStore is what Replay uses of a store: the dead letter and its
// status, the unit's current lease (the apply runs under its token) and
// the apply. Every persistence.Store is one.
type ReplayStore interface {
	persistence.DeadLetters
	persistence.Leases
	persistence.Applier
}

// Replay applies dead letter id again through its source's decode and apply
// path, as it is configured now (a fixed key field, a larger
// max_message_bytes, a fixed handler), and marks it replayed; when it still
// cannot be applied it stays pending with one more attempt and the new
// reason.
//
// The apply is fenced like any other: it runs under the unit's current
// lease token, so it fails with ErrLeaseLost rather than race a change of
// owner, and it does not move the unit's checkpoint. The message is applied
// as of now: it may overwrite a newer document of the same key.
//
// The apply and the status change are two transactions; a crash between
// them leaves the dead letter pending though applied, and replaying it again
// applies the same message again (an idempotent upsert or delete in records
// mode).
func Replay(ctx context.Context, store ReplayStore, spec SourceSpec, id int64) (ReplayResult, error) {
	dl, err := store.DeadLetter(ctx, id)
	if err != nil {
		return ReplayResult{}, fmt.Errorf("dead letter %d: %w", id, err)
	}
	if dl.Source != spec.Name {
		return ReplayResult{}, fmt.Errorf("dead letter %d is of source %s, not %s: %w", id, dl.Source, spec.Name, ErrNotReplayable)
	}
	if dl.Status != persistence.DeadLetterPending {
		return ReplayResult{}, fmt.Errorf("dead letter %d is %s: %w", id, dl.Status, ErrNotReplayable)
	}
	if dl.Cut() {
		return ReplayResult{}, fmt.Errorf("dead letter %d keeps only the first %d of the message's %d bytes (dead_letter_max_bytes): the message is not whole; resolve it, or publish it again from its origin: %w",
			id, len(dl.Payload), dl.PayloadBytes, ErrNotReplayable)
	}
	if spec.Table == "" {
		spec.Table = spec.Name
	}
	key, err := decode.KeyBytes(dl.MsgKey)
	if err != nil {
		return ReplayResult{}, fmt.Errorf("dead letter %d: %w", id, err)
	}
	m := brokers.Message{Position: dl.Position, Key: key, Value: dl.Payload}
	dc := spec.decodeConfig()
	if err := dc.Resolve(ctx, []brokers.Message{m}); err != nil {
		return ReplayResult{}, fmt.Errorf("dead letter %d: %w", id, err)
	}
	op := dc.Record(m)
	if spec.Handler != nil {
		op = dc.Raw(m)
	}
	// keep the dead letter's identity: the same (source, unit, position) row,
	// and the trace it recorded (the message's headers are not kept)
	op.Position = dl.Position
	trace := decode.ReasonTraceID(dl.Reason)
	if op.Kind == persistence.OpDeadLetter {
		op.Reason = decode.ReasonWithTraceID(op.Reason, trace)
	}
	b := &persistence.Batch{Source: dl.Source, Unit: dl.Unit, Table: spec.Table, Ops: []persistence.Op{op}}
	if op.Kind == persistence.OpMessage {
		h := spec.Handler
		b.Table = ""
		b.Handle = func(c context.Context, tx persistence.Tx, ops []persistence.Op) error {
			return h(c, tx, Batch{Source: dl.Source, Unit: dl.Unit, IdempotencyKey: dl.Unit + "/" + dl.Position + ".." + dl.Position,
				Node: b.Lease.Owner, Token: b.Lease.Token, Messages: []brokers.Message{m}})
		}
	}
	var perm *PermanentError
	for attempt := 0; ; attempt++ {
		b.Lease, err = currentLease(ctx, store, dl.Unit)
		if err != nil {
			return ReplayResult{}, err
		}
		_, err = store.Apply(ctx, b)
		switch {
		case err == nil:
		case errors.Is(err, persistence.ErrLeaseLost) && attempt < 3:
			continue // the unit changed hands meanwhile: read the new token
		case errors.As(err, &perm) && op.Kind == persistence.OpMessage:
			op = persistence.Op{Kind: persistence.OpDeadLetter, Position: dl.Position, MsgKey: dl.MsgKey, Payload: dl.Payload,
				Reason: decode.ReasonWithTraceID("handler: "+perm.Err.Error(), trace)}
			b.Ops, b.Handle = []persistence.Op{op}, nil
			continue
		default:
			return ReplayResult{}, fmt.Errorf("replay dead letter %d: %w", id, err)
		}
		break
	}
	if op.Kind == persistence.OpDeadLetter {
		return ReplayResult{Reason: op.Reason}, nil
	}
	if err := store.SetDeadLetterStatus(ctx, id, persistence.DeadLetterReplayed); err != nil {
		return ReplayResult{Applied: true}, fmt.Errorf("dead letter %d applied, but marking it replayed failed: %w", id, err)
	}
	return ReplayResult{Applied: true}, nil
}

func currentLease(ctx context.Context, store persistence.Leases, unit string) (persistence.Lease, error) {
	ls, err := store.List(ctx)
	if err != nil {
		return persistence.Lease{}, fmt.Errorf("read leases: %w", err)
	}
	for _, l := range ls {
		if l.Unit == unit {
			return l, nil
		}
	}
	return persistence.Lease{}, fmt.Errorf("unit %s has no lease row: it was never run", unit)
}
