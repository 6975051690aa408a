package memory

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/drover-dev/drover/persistence"
)

type controlKey struct{ source, unit string }

// SetControl implements persistence.Controls.
func (s *Store) SetControl(ctx context.Context, c persistence.ControlChange) (persistence.Control, error) {
	if err := c.Check(); err != nil {
		return persistence.Control{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(ctx, OpControls); err != nil {
		return persistence.Control{}, fmt.Errorf("set control %s of %s: %w", c.Action, c.Source, err)
	}
	k := controlKey{c.Source, c.Unit}
	row := c.Apply(s.controls[k])
	row.UpdatedAt = s.now()
	if c.Seek != "" {
		row.SeekRequestedAt = row.UpdatedAt
	}
	if s.controls == nil {
		s.controls = map[controlKey]persistence.Control{}
	}
	s.controls[k] = row
	s.audit = append(s.audit, persistence.AuditEntry{ID: int64(len(s.audit)) + 1, At: row.UpdatedAt, Node: c.Node,
		By: c.By, Action: c.Action, Source: c.Source, Unit: c.Unit, Args: c.Args, Reason: c.Reason})
	return row, nil
}

// ListControls implements persistence.Controls.
func (s *Store) ListControls(ctx context.Context) ([]persistence.Control, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(ctx, OpControls); err != nil {
		return nil, fmt.Errorf("list controls: %w", err)
	}
	out := make([]persistence.Control, 0, len(s.controls))
	now := s.now()
	for _, c := range s.controls {
		c.SeekAge = seekAge(c, now)
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b persistence.Control) int {
		if d := strings.Compare(a.Source, b.Source); d != 0 {
			return d
		}
		return strings.Compare(a.Unit, b.Unit)
	})
	return out, nil
}

// WriteAudit implements persistence.Controls.
func (s *Store) WriteAudit(ctx context.Context, e persistence.AuditEntry) (persistence.AuditEntry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(ctx, OpControls); err != nil {
		return e, fmt.Errorf("write audit %s: %w", e.Action, err)
	}
	if e.Action == "" {
		return e, fmt.Errorf("write audit: empty action")
	}
	e.ID, e.At = int64(len(s.audit))+1, s.now()
	s.audit = append(s.audit, e)
	return e, nil
}

// ListAudit implements persistence.Controls.
func (s *Store) ListAudit(ctx context.Context, f persistence.AuditFilter) ([]persistence.AuditEntry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(ctx, OpControls); err != nil {
		return nil, fmt.Errorf("list audit: %w", err)
	}
	var out []persistence.AuditEntry
	for i := len(s.audit) - 1; i >= 0 && (f.Limit <= 0 || len(out) < f.Limit); i-- {
		e := s.audit[i]
		if (f.Source != "" && e.Source != f.Source) || (f.Unit != "" && e.Unit != f.Unit) || e.At.Before(f.Since) {
			continue
		}
		out = append(out, e)
	}
	slices.Reverse(out)
	return out, nil
}

// ExpireSeek implements persistence.Controls.
func (s *Store) ExpireSeek(ctx context.Context, e persistence.SeekExpiry) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(ctx, OpControls); err != nil {
		return false, fmt.Errorf("expire seek %d of %s: %w", e.ID, e.Unit, err)
	}
	k := controlKey{e.Source, e.Unit}
	row, ok := s.controls[k]
	if !ok || row.SeekID != e.ID || row.SeekDoneID >= e.ID || seekAge(row, s.now()) <= e.OlderThan {
		return false, nil
	}
	row.SeekDoneID = e.ID
	s.controls[k] = row
	s.audit = append(s.audit, persistence.AuditEntry{ID: int64(len(s.audit)) + 1, At: s.now(), Node: e.Node,
		By: e.By, Action: "seek", Source: e.Source, Unit: e.Unit, Args: e.AuditArgs(), Reason: e.Reason})
	return true, nil
}

// seekAge is how long row's newest seek has waited at now (zero when it
// has none).
func seekAge(row persistence.Control, now time.Time) time.Duration {
	if row.SeekRequestedAt.IsZero() {
		return 0
	}
	return now.Sub(row.SeekRequestedAt)
}
