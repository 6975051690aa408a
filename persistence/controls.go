package persistence

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Control is an operator's standing control of one target: a whole source
// (Unit empty) or one unit (its full id, "orders/3"). It is the row of
// drover_controls; a target never controlled has none.
type Control struct {
	Source string
	Unit   string // "" for the whole source
	// Paused: the target's units fetch nothing (they keep their leases).
	// A unit is paused when its own row or its source's row says so.
	Paused bool
	// Seek is the target of the newest seek asked for (issue 13 item 2);
	// SeekID counts the seeks asked for this target (it increases with
	// every SetControl that sets Seek), SeekDoneID is the last one carried
	// out. A seek is pending while SeekDoneID < SeekID.
	Seek       string
	SeekID     int64
	SeekDoneID int64
	// SeekRequestedAt is when the newest seek was asked for (the store's
	// clock; zero when none was): a seek pending longer than the node's
	// seek expiry is never carried out (it is marked done, expired).
	SeekRequestedAt time.Time
	// SeekAge is how long the newest seek had waited when the row was
	// read, by the store's clock (never the node's: node clocks may run
	// ahead of the store's). On PostgreSQL it counts from the later of
	// seek_requested_at and updated_at, so that a seek written by a node
	// from before migration 7 (which leaves seek_requested_at) is young.
	// Meaningful for a pending seek (PendingSeek) only.
	SeekAge time.Duration
	// By and Reason are those of the last change; UpdatedAt its time by
	// the store's clock.
	By        string
	Reason    string
	UpdatedAt time.Time
}

// ControlChange is what SetControl writes: the target's row, changed as
// Paused and Seek say, and one audit entry.
type ControlChange struct {
	Source string
	Unit   string // "" for the whole source
	// Paused, when set, is the row's new paused flag.
	Paused *bool
	// Seek, when not empty, asks for a new seek: the row's Seek becomes it
	// and its SeekID the previous one plus one.
	Seek string
	// Node took the control; Action names it (pause, resume, seek); Args
	// is the audit entry's args text. By and Reason go to the row and
	// the audit entry.
	Node   string
	Action string
	Args   string
	By     string
	Reason string
}

// Check refuses a change that names no source or action, or that changes
// nothing.
func (c *ControlChange) Check() error {
	switch {
	case c.Source == "":
		return errors.New("control: empty source")
	case c.Action == "":
		return fmt.Errorf("control of %s: empty action", c.target())
	case c.Paused == nil && c.Seek == "":
		return fmt.Errorf("control %s of %s: changes nothing (neither paused nor seek)", c.Action, c.target())
	}
	return nil
}

func (c *ControlChange) target() string {
	if c.Unit == "" {
		return c.Source
	}
	return c.Unit
}

// Apply is the row after the change, from the row before (cur; the zero
// Control when there was none): the stores' shared rule. By, Reason and
// UpdatedAt are set by the store.
func (c *ControlChange) Apply(cur Control) Control {
	cur.Source, cur.Unit = c.Source, c.Unit
	if c.Paused != nil {
		cur.Paused = *c.Paused
	}
	if c.Seek != "" {
		cur.Seek = c.Seek
		cur.SeekID++
	}
	cur.By, cur.Reason = c.By, c.Reason
	return cur
}

// AuditEntry is one row of drover_control_audit: a control carried out.
type AuditEntry struct {
	ID     int64     // increasing in the order of writes
	At     time.Time // by the store's clock
	Node   string    // the node that took the control
	By     string
	Action string
	Source string // "" for a control of no source (drain, reload)
	Unit   string
	Args   string
	Reason string
}

// AuditFilter selects audit entries; zero fields select all.
type AuditFilter struct {
	Source string
	Unit   string    // exactly this unit ("" matches every entry)
	Since  time.Time // entries at or after this time
	Limit  int       // the newest Limit entries; 0: all
}

// Controls keeps the operators' controls and their audit trail. Every
// method is safe for concurrent use and may block on the database.
type Controls interface {
	// SetControl writes the change to its target's row (created when
	// missing) and an audit entry, in one transaction, and returns the
	// row as written.
	SetControl(ctx context.Context, c ControlChange) (Control, error)
	// ListControls returns every control row, ordered by source and unit.
	// Nodes call it once per renewal round (one statement however many
	// units), so it must stay cheap: the table holds a row per target
	// ever controlled.
	ListControls(ctx context.Context) ([]Control, error)
	// WriteAudit records a control that keeps no row (drain, reload);
	// e.ID and e.At are set by the store and returned.
	WriteAudit(ctx context.Context, e AuditEntry) (AuditEntry, error)
	// ListAudit returns the entries f selects, oldest first.
	ListAudit(ctx context.Context, f AuditFilter) ([]AuditEntry, error)
	// ExpireSeek marks the seek e.ID of e.Unit's row done without a
	// lease, with an audit entry (action seek, args "id=N expired: …"),
	// in one transaction: only while it is the row's newest seek, not
	// done, and older than e.OlderThan by the store's clock (the age of
	// Control.SeekAge). It reports whether it marked it (false: done
	// already, overtaken by a newer seek, not old enough, or no row). A seek's own fenced mark
	// (Batch.SeekDone) after it fails with ErrSeekDone, so an expired
	// seek is never carried out.
	ExpireSeek(ctx context.Context, e SeekExpiry) (bool, error)
}

// SeekExpiry is what ExpireSeek writes: the seek ID of Unit (of Source)
// expired, if it has waited longer than OlderThan by the store's clock;
// Node marks it, Why says why (the audit args), By and Reason are the
// seek's (the audit entry's).
type SeekExpiry struct {
	Source, Unit string
	ID           int64
	OlderThan    time.Duration
	Node, Why    string
	By, Reason   string
}

// AuditArgs is the audit entry's args of the expiry.
func (e SeekExpiry) AuditArgs() string { return fmt.Sprintf("id=%d expired: %s", e.ID, e.Why) }

// PendingSeek reports whether c is a unit's row with a seek not done.
func (c Control) PendingSeek() bool { return c.Unit != "" && c.Seek != "" && c.SeekID > c.SeekDoneID }

// Paused reports whether cs pause unit of source: its own row or its
// source's says paused.
func Paused(cs []Control, source, unit string) bool {
	for _, c := range cs {
		if c.Paused && c.Source == source && (c.Unit == "" || c.Unit == unit) {
			return true
		}
	}
	return false
}
