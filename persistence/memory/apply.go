package memory

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/drover-dev/drover/brokers"
	"github.com/drover-dev/drover/persistence"
)

// Apply implements persistence.Applier. It holds the store's mutex for the
// whole batch, b.Handle included, so batches are serialised and a failed one
// leaves no trace: every write goes to a buffer that is copied into the
// store only when nothing failed. Handle must therefore write only through
// its Tx and never call the Store, which would deadlock.
func (s *Store) Apply(ctx context.Context, b *persistence.Batch) (persistence.Applied, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applyLocked(ctx, b)
}

// ApplyGroup implements persistence.GroupApplier: the batches one after
// the other under one hold of the store's mutex, each exactly as Apply
// would write it (faults injected for "apply" are used up per batch, as
// by that many Applies), so one batch's failure leaves the others alone.
func (s *Store) ApplyGroup(ctx context.Context, bs []*persistence.Batch) []persistence.GroupResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]persistence.GroupResult, len(bs))
	for i, b := range bs {
		out[i].Applied, out[i].Err = s.applyLocked(ctx, b)
	}
	return out
}

// applyLocked is Apply with s.mu held.
func (s *Store) applyLocked(ctx context.Context, b *persistence.Batch) (persistence.Applied, error) {
	if err := s.enter(ctx, OpApply); err != nil {
		return persistence.Applied{}, fmt.Errorf("apply %s: %w", b.Unit, err)
	}
	if b.Reset && b.Checkpoint == "" {
		// Refused before anything runs, Handle included.
		return persistence.Applied{}, fmt.Errorf("apply %s: reset to an empty checkpoint", b.Unit)
	}
	if !s.faults.noFencing {
		cur, ok := s.leases[b.Unit]
		if !ok || cur.Token != b.Lease.Token {
			return persistence.Applied{}, fmt.Errorf("apply %s: token %d: %w", b.Unit, b.Lease.Token, persistence.ErrLeaseLost)
		}
	}
	if row, ok := s.controls[controlKey{b.Source, b.Unit}]; ok && b.SeekDone != 0 && row.SeekDoneID >= b.SeekDone {
		return persistence.Applied{}, fmt.Errorf("apply %s: seek %d (done: %d): %w", b.Unit, b.SeekDone, row.SeekDoneID, persistence.ErrSeekDone)
	}
	t, applied, err := s.prepare(ctx, b)
	if err != nil {
		return persistence.Applied{}, err // Handle's error as is; ours wrapped
	}
	s.commit(t)
	if s.faults.afterCommit > 0 {
		s.faults.afterCommit--
		return persistence.Applied{}, fmt.Errorf("apply %s: commit outcome unknown: %w", b.Unit, persistence.ErrInjected)
	}
	return applied, nil
}

// prepare runs the batch into a transaction buffer without touching the
// store. The caller holds s.mu.
func (s *Store) prepare(ctx context.Context, b *persistence.Batch) (*tx, persistence.Applied, error) {
	var applied persistence.Applied
	now := s.now()
	t := &tx{
		s:        s,
		now:      now,
		source:   b.Source,
		unit:     b.Unit,
		writes:   make(map[string]map[string]write),
		seekDone: b.SeekDone,
	}
	if n := len(b.Ops); n > 0 {
		t.position = b.Ops[n-1].Position
	}
	hasRecords := false
	for i, op := range b.Ops {
		switch op.Kind {
		case persistence.OpUpsert:
			if err := persistence.CheckJSON(op.Doc); err != nil {
				return nil, applied, fmt.Errorf("apply %s: upsert %q: %w", b.Unit, op.Key, persistence.Refused(err))
			}
			hasRecords = true
		case persistence.OpDelete:
			hasRecords = true
		case persistence.OpDeadLetter, persistence.OpMessage:
		default:
			return nil, applied, fmt.Errorf("apply %s: op %d: unknown kind %d", b.Unit, i, op.Kind)
		}
	}
	if hasRecords {
		if err := persistence.ValidTable(b.Table); err != nil {
			return nil, applied, fmt.Errorf("apply %s: %w", b.Unit, err)
		}
	}

	fresh := b.Ops
	if b.Dedupe {
		fresh = make([]persistence.Op, 0, len(b.Ops))
		seen := make(map[string]bool)
		for _, op := range b.Ops {
			if id := op.MessageID; id != "" {
				if _, old := s.dedupe[dedupeKey{b.Source, id}]; old || seen[id] {
					applied.Duplicates = append(applied.Duplicates, id)
					continue
				}
				seen[id] = true
				t.dedupeIDs = append(t.dedupeIDs, id)
			}
			fresh = append(fresh, op)
		}
	}

	records := persistence.Fold(fresh)
	for _, op := range records {
		if op.Kind == persistence.OpDelete {
			applied.Deleted++
			t.stage(b.Table, op.Key, write{deleted: true})
			continue
		}
		same, err := t.sameAsStored(b.Table, op.Key, op.Doc)
		if err != nil {
			return nil, applied, fmt.Errorf("apply %s: upsert %q: %w", b.Unit, op.Key, err)
		}
		if same {
			applied.Unchanged++
			continue
		}
		if err := s.faults.refuse(b.Table, op.Doc); err != nil {
			return nil, applied, fmt.Errorf("apply %s: upsert into %s %q: %w", b.Unit, b.Table, op.Key, err)
		}
		applied.Upserted++
		t.stage(b.Table, op.Key, write{doc: slices.Clone(op.Doc), position: op.Position})
	}

	var msgs []persistence.Op
	for _, op := range fresh {
		switch op.Kind {
		case persistence.OpDeadLetter:
			t.deadLetters = append(t.deadLetters, op)
		case persistence.OpMessage:
			msgs = append(msgs, op)
		}
	}
	applied.DeadLettered = len(t.deadLetters)

	if len(msgs) > 0 {
		if b.Handle == nil {
			return nil, applied, fmt.Errorf("apply %s: %d message ops and no Handle", b.Unit, len(msgs))
		}
		err := b.Handle(ctx, t, msgs)
		t.finish()
		if err != nil {
			return nil, applied, err
		}
		applied.Handled = len(msgs)
	}

	if b.Reset {
		id := b.StreamID
		if id == "" {
			id = s.checkpoints[b.Unit].StreamID
		}
		t.checkpoint = &persistence.Checkpoint{Unit: b.Unit, Source: b.Source, Position: b.Checkpoint,
			Finished: b.Finished, Token: b.Lease.Token, UpdatedAt: now, StreamID: id}
	} else if b.Checkpoint != "" || b.Finished {
		cur, has := s.checkpoints[b.Unit]
		pos := b.Checkpoint
		if pos == "" {
			pos = cur.Position
		}
		c := brokers.ComparePositions(pos, cur.Position)
		if !has || c > 0 || (c == 0 && b.Finished && !cur.Finished) {
			t.checkpoint = &persistence.Checkpoint{
				Unit:      b.Unit,
				Source:    b.Source,
				Position:  pos,
				Finished:  cur.Finished || b.Finished,
				Token:     b.Lease.Token,
				UpdatedAt: now,
				StreamID:  cur.StreamID,
			}
		}
	}
	return t, applied, nil
}

// commit copies a prepared transaction into the store. It cannot fail. The
// caller holds s.mu.
func (s *Store) commit(t *tx) {
	for _, id := range t.dedupeIDs {
		s.dedupe[dedupeKey{t.source, id}] = t.now
	}
	for _, table := range slices.Sorted(maps.Keys(t.writes)) {
		rows := s.tables[table]
		if rows == nil {
			rows = make(map[string]persistence.Record)
			s.tables[table] = rows
		}
		for key, w := range t.writes[table] {
			if w.deleted {
				delete(rows, key)
				continue
			}
			if old, ok := rows[key]; ok {
				// A handler may write a document back to its stored value
				// within one transaction: that is not a change either.
				if same, err := persistence.JSONEqual(old.Doc, w.doc); err == nil && same {
					continue
				}
			}
			rows[key] = persistence.Record{
				Key:       key,
				Doc:       w.doc,
				Source:    t.source,
				Unit:      t.unit,
				Position:  w.position,
				UpdatedAt: t.now,
			}
		}
	}
	for _, op := range t.deadLetters {
		k := dlKey{t.source, t.unit, op.Position}
		if id, ok := s.dlByPos[k]; ok {
			d := &s.deadLetters[id-1]
			d.Attempts++
			d.LastFailedAt = t.now
			d.MsgKey = op.MsgKey
			d.Payload = slices.Clone(op.Payload)
			d.PayloadBytes = persistence.StoredPayloadBytes(&op)
			d.Reason = op.Reason
			d.Status = persistence.DeadLetterPending
			continue
		}
		id := int64(len(s.deadLetters)) + 1
		s.deadLetters = append(s.deadLetters, persistence.DeadLetter{
			ID:            id,
			Source:        t.source,
			Unit:          t.unit,
			Position:      op.Position,
			MsgKey:        op.MsgKey,
			Payload:       slices.Clone(op.Payload),
			PayloadBytes:  persistence.StoredPayloadBytes(&op),
			Reason:        op.Reason,
			Attempts:      1,
			Status:        persistence.DeadLetterPending,
			FirstFailedAt: t.now,
			LastFailedAt:  t.now,
		})
		s.dlByPos[k] = id
	}
	if t.checkpoint != nil {
		s.checkpoints[t.unit] = *t.checkpoint
	}
	if k := (controlKey{t.source, t.unit}); t.seekDone != 0 {
		if row, ok := s.controls[k]; ok {
			row.SeekDoneID = t.seekDone // above the stored one (applyLocked)
			s.controls[k] = row
		}
	}
}

// write is one staged change of a records table.
type write struct {
	deleted  bool
	doc      []byte
	position string
}

// tx buffers one Apply. The store's mutex is held while it is open; its own
// mutex only guards against a handler that keeps using it from another
// goroutine after Handle returned.
type tx struct {
	s                      *Store
	now                    time.Time
	source, unit, position string

	writes      map[string]map[string]write // table -> key -> change
	dedupeIDs   []string
	deadLetters []persistence.Op
	checkpoint  *persistence.Checkpoint
	seekDone    int64 // Batch.SeekDone

	mu   sync.Mutex // guards done and, while Handle runs, the buffers
	done bool
}

var _ persistence.Tx = (*tx)(nil)

func (t *tx) stage(table, key string, w write) {
	rows := t.writes[table]
	if rows == nil {
		rows = make(map[string]write)
		t.writes[table] = rows
	}
	rows[key] = w
}

// current is the document under key as this transaction sees it.
func (t *tx) current(table, key string) ([]byte, bool) {
	if w, ok := t.writes[table][key]; ok {
		if w.deleted {
			return nil, false
		}
		return w.doc, true
	}
	r, ok := t.s.tables[table][key]
	return r.Doc, ok
}

// sameAsStored reports whether doc, already checked to be JSON, equals
// what the transaction sees under key.
func (t *tx) sameAsStored(table, key string, doc []byte) (bool, error) {
	old, ok := t.current(table, key)
	if !ok {
		return false, nil
	}
	return persistence.JSONEqualValid(old, doc) // both checked on their way in
}

// finish closes the transaction to the handler.
func (t *tx) finish() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.done = true
}

// open is checked by every Tx method with t.mu held.
func (t *tx) open(ctx context.Context) error {
	if t.done {
		return fmt.Errorf("transaction of %s: already finished", t.unit)
	}
	return ctx.Err()
}

// usable checks, with t.mu held, that a Tx method may run on table.
func (t *tx) usable(ctx context.Context, table string) error {
	if err := t.open(ctx); err != nil {
		return err
	}
	return persistence.ValidTable(table)
}

// Put implements persistence.Tx.
func (t *tx) Put(ctx context.Context, table, key string, doc []byte) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.usable(ctx, table); err != nil {
		return fmt.Errorf("put %s/%s: %w", table, key, err)
	}
	if err := persistence.CheckJSON(doc); err != nil {
		return fmt.Errorf("put %s/%s: %w", table, key, persistence.Refused(err))
	}
	same, err := t.sameAsStored(table, key, doc)
	if err != nil {
		return fmt.Errorf("put %s/%s: %w", table, key, err)
	}
	if !same {
		if err := t.s.faults.refuse(table, doc); err != nil {
			return fmt.Errorf("put %s/%s: %w", table, key, err)
		}
		t.stage(table, key, write{doc: slices.Clone(doc), position: t.position})
	}
	return nil
}

// Delete implements persistence.Tx.
func (t *tx) Delete(ctx context.Context, table, key string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.usable(ctx, table); err != nil {
		return fmt.Errorf("delete %s/%s: %w", table, key, err)
	}
	t.stage(table, key, write{deleted: true})
	return nil
}

// Get implements persistence.Tx.
func (t *tx) Get(ctx context.Context, table, key string) ([]byte, bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.usable(ctx, table); err != nil {
		return nil, false, fmt.Errorf("get %s/%s: %w", table, key, err)
	}
	doc, ok := t.current(table, key)
	return slices.Clone(doc), ok, nil
}

// Exec implements persistence.Tx: the memory store has no SQL.
func (t *tx) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	return 0, fmt.Errorf("exec: %w", persistence.ErrUnsupported)
}

// Raw implements persistence.Tx: there is no driver transaction.
func (t *tx) Raw() any { return nil }
