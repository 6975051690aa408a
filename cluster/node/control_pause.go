package node

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/drover-dev/drover/cluster/debug"
	"github.com/drover-dev/drover/persistence"
)

// ControlRow is a control row as a control's reply shows it.
type ControlRow struct {
	Source    string    `json:"source"`
	Unit      string    `json:"unit,omitempty"`
	Paused    bool      `json:"paused"`
	Seek      string    `json:"seek,omitempty"`
	SeekID    int64     `json:"seek_id,omitempty"`
	SeekDone  int64     `json:"seek_done_id,omitempty"`
	By        string    `json:"by,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
}

func controlRow(c persistence.Control) ControlRow {
	return ControlRow{Source: c.Source, Unit: c.Unit, Paused: c.Paused, Seek: c.Seek, SeekID: c.SeekID,
		SeekDone: c.SeekDoneID, By: c.By, Reason: c.Reason, UpdatedAt: c.UpdatedAt}
}

// controlPause carries out pause and resume (issue 13 item 1): it writes
// the target's row and the audit entry in one transaction, then applies
// the controls table on this node at once; every other node reads it at
// its next renewal round.
func (n *Node) controlPause(ctx context.Context, req debug.ControlRequest) (debug.ControlReply, error) {
	unit, err := n.controlTarget(ctx, req)
	if err != nil {
		return debug.ControlReply{}, err
	}
	paused := req.Action == debug.ActionPause
	row, err := n.store.SetControl(ctx, persistence.ControlChange{Source: req.Source, Unit: unit, Paused: &paused,
		Node: n.cfg.Node.Name, Action: req.Action, By: req.By, Reason: req.Reason})
	if err != nil {
		return debug.ControlReply{}, err
	}
	target := req.Source
	if unit != "" {
		target = unit
	}
	detail := "paused " + target + ": it keeps its lease and fetches nothing, on whichever node holds it (every node reads the control within a renewal round)"
	if !paused {
		detail = "resumed " + target + ": its units go on from their checkpoints"
	}
	// this node at once; the others within a renewal round
	if cs, err := n.store.ListControls(ctx); err == nil {
		n.actors.SetControls(cs)
		if !paused && persistence.Paused(cs, req.Source, unit) {
			detail = "resumed " + target + ", but its source " + req.Source + " stays paused"
		}
	} else {
		n.log.Warn("control written; this node applies it at its next renewal round", "action", req.Action, "error", err)
	}
	n.log.Info("control", "action", req.Action, "target", target, "by", req.By, "reason", req.Reason)
	return debug.ControlReply{Action: req.Action, Node: n.cfg.Node.Name, Detail: detail, Result: controlRow(row)}, nil
}

// controlTarget checks a control's source and unit: the source must be
// configured, the unit (given as "orders/3" or "3") one drover has run
// (it has a lease row) or one this node shows. It returns the unit's full
// id, "" for the whole source.
func (n *Node) controlTarget(ctx context.Context, req debug.ControlRequest) (string, error) {
	if req.Source == "" {
		return "", fmt.Errorf("%w: %s needs a source (and, for one unit, the unit)", debug.ErrBadControl, req.Action)
	}
	running := n.runningSources()
	names := make([]string, 0, len(running))
	for _, s := range running {
		names = append(names, s.Name)
	}
	if !slices.Contains(names, req.Source) {
		return "", fmt.Errorf("%w: no source %q in the config (sources: %s)", debug.ErrBadControl, req.Source, strings.Join(names, ", "))
	}
	if req.Unit == "" {
		return "", nil
	}
	unit := req.Unit
	if !strings.Contains(unit, "/") {
		unit = req.Source + "/" + unit
	}
	if src, part, _ := strings.Cut(unit, "/"); src != req.Source || part == "" {
		return "", fmt.Errorf("%w: unit %q is not a unit of source %s (units are named %s/<partition>)", debug.ErrBadControl, req.Unit, req.Source, req.Source)
	}
	for _, s := range n.actors.Tree().Sources {
		for _, u := range s.Units {
			if u.Unit == unit {
				return unit, nil
			}
		}
	}
	ls, err := n.store.List(ctx)
	if err != nil {
		return "", fmt.Errorf("look the unit up: %w", err)
	}
	for _, l := range ls {
		if l.Unit == unit {
			return unit, nil
		}
	}
	return "", fmt.Errorf("%w: no unit %s: no node has run it (see drover tree --cluster)", debug.ErrBadControl, unit)
}
