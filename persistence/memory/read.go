package memory

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/drover-dev/drover/persistence"
)

// Checkpoint implements persistence.Checkpoints.
func (s *Store) Checkpoint(ctx context.Context, unit string) (persistence.Checkpoint, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(ctx, OpCheckpoint); err != nil {
		return persistence.Checkpoint{}, fmt.Errorf("checkpoint %s: %w", unit, err)
	}
	c, ok := s.checkpoints[unit]
	if !ok {
		return persistence.Checkpoint{}, fmt.Errorf("checkpoint %s: %w", unit, persistence.ErrNotFound)
	}
	return c, nil
}

// Checkpoints implements persistence.Checkpoints.
func (s *Store) Checkpoints(ctx context.Context, source string) ([]persistence.Checkpoint, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(ctx, OpCheckpoint); err != nil {
		return nil, fmt.Errorf("checkpoints of %s: %w", source, err)
	}
	var out []persistence.Checkpoint
	for _, c := range s.checkpoints {
		if c.Source == source {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b persistence.Checkpoint) int { return strings.Compare(a.Unit, b.Unit) })
	return out, nil
}

// Records implements persistence.Records. A limit of 0 or less means no
// limit.
func (s *Store) Records(ctx context.Context, table, afterKey string, limit int) ([]persistence.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(ctx, opOther); err != nil {
		return nil, fmt.Errorf("records of %s: %w", table, err)
	}
	if err := persistence.ValidTable(table); err != nil {
		return nil, fmt.Errorf("records: %w", err)
	}
	rows := s.tables[table]
	keys := slices.Sorted(maps.Keys(rows))
	i, _ := slices.BinarySearch(keys, afterKey)
	if i < len(keys) && keys[i] == afterKey {
		i++
	}
	keys = keys[i:]
	if limit > 0 && len(keys) > limit {
		keys = keys[:limit]
	}
	out := make([]persistence.Record, 0, len(keys))
	for _, k := range keys {
		r := rows[k]
		r.Doc = slices.Clone(r.Doc)
		out = append(out, r)
	}
	return out, nil
}

// DeadLetters implements persistence.DeadLetters.
func (s *Store) DeadLetters(ctx context.Context, f persistence.DeadLetterFilter) ([]persistence.DeadLetter, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(ctx, opOther); err != nil {
		return nil, fmt.Errorf("dead letters: %w", err)
	}
	var out []persistence.DeadLetter
	for _, d := range s.deadLetters[min(max(f.AfterID, 0), int64(len(s.deadLetters))):] {
		if (f.Source != "" && d.Source != f.Source) || (f.Status != "" && d.Status != f.Status) {
			continue
		}
		d.Payload = slices.Clone(d.Payload)
		out = append(out, d)
		if f.Limit > 0 && len(out) == f.Limit {
			break
		}
	}
	return out, nil
}

// DeadLetter implements persistence.DeadLetters.
func (s *Store) DeadLetter(ctx context.Context, id int64) (persistence.DeadLetter, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(ctx, opOther); err != nil {
		return persistence.DeadLetter{}, fmt.Errorf("dead letter %d: %w", id, err)
	}
	if id < 1 || id > int64(len(s.deadLetters)) {
		return persistence.DeadLetter{}, fmt.Errorf("dead letter %d: %w", id, persistence.ErrNotFound)
	}
	d := s.deadLetters[id-1]
	d.Payload = slices.Clone(d.Payload)
	return d, nil
}

// SetDeadLetterStatus implements persistence.DeadLetters.
func (s *Store) SetDeadLetterStatus(ctx context.Context, id int64, st persistence.DeadLetterStatus) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(ctx, opOther); err != nil {
		return fmt.Errorf("set dead letter %d %s: %w", id, st, err)
	}
	if err := checkStatus(st); err != nil {
		return fmt.Errorf("set dead letter %d: %w", id, err)
	}
	if id < 1 || id > int64(len(s.deadLetters)) {
		return fmt.Errorf("set dead letter %d %s: %w", id, st, persistence.ErrNotFound)
	}
	s.deadLetters[id-1].Status = st
	return nil
}

func checkStatus(st persistence.DeadLetterStatus) error {
	switch st {
	case persistence.DeadLetterPending, persistence.DeadLetterReplayed, persistence.DeadLetterResolved:
		return nil
	}
	return fmt.Errorf("unknown dead letter status %q", st)
}

// WriteQuality implements persistence.Quality. Ids are 1, 2, ... in write
// order; w.ID is ignored.
func (s *Store) WriteQuality(ctx context.Context, w persistence.QualityWindow) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(ctx, opOther); err != nil {
		return 0, fmt.Errorf("write quality of %s: %w", w.Source, err)
	}
	w = cloneQuality(w)
	w.ID = int64(len(s.quality)) + 1
	w.WindowStart = w.WindowStart.UTC()
	w.WindowEnd = w.WindowEnd.UTC()
	s.quality = append(s.quality, w)
	return w.ID, nil
}

// QualityWindows implements persistence.Quality.
func (s *Store) QualityWindows(ctx context.Context, source string, limit int) ([]persistence.QualityWindow, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(ctx, opOther); err != nil {
		return nil, fmt.Errorf("quality windows of %s: %w", source, err)
	}
	var out []persistence.QualityWindow
	for i := len(s.quality) - 1; i >= 0; i-- {
		w := s.quality[i]
		if source != "" && w.Source != source {
			continue
		}
		out = append(out, cloneQuality(w))
		if limit > 0 && len(out) == limit {
			break
		}
	}
	return out, nil
}

func cloneQuality(w persistence.QualityWindow) persistence.QualityWindow {
	if w.Fields != nil {
		fields := make(map[string]persistence.FieldStats, len(w.Fields))
		for k, f := range w.Fields {
			f.Types = maps.Clone(f.Types)
			fields[k] = f
		}
		w.Fields = fields
	}
	w.Drift = slices.Clone(w.Drift)
	return w
}

// PruneDedupe implements persistence.Dedupe.
func (s *Store) PruneDedupe(ctx context.Context, before time.Time) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(ctx, opOther); err != nil {
		return 0, fmt.Errorf("prune dedupe: %w", err)
	}
	var n int64
	for k, at := range s.dedupe {
		if at.Before(before) {
			delete(s.dedupe, k)
			n++
		}
	}
	return n, nil
}
