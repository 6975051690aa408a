package node

import (
	"context"
	"fmt"
	"strings"

	"github.com/drover-dev/drover/actors/events"
	"github.com/drover-dev/drover/cluster/debug"
)

// Control carries out an operator's control (debug.Controller): POST
// /debug/control/{action} and the drover pause|resume|seek|drain|undrain|
// reload commands.
// Every control asked of this node is recorded in its event log, with
// its outcome (RecordControl).
func (n *Node) Control(ctx context.Context, req debug.ControlRequest) (reply debug.ControlReply, err error) {
	defer func() { n.RecordControl(req, err) }()
	switch req.Action {
	case debug.ActionPause, debug.ActionResume:
		return n.controlPause(ctx, req)
	case debug.ActionSeek:
		return n.controlSeek(ctx, req)
	case debug.ActionDrain, debug.ActionUndrain, debug.ActionExit:
		return n.controlDrain(ctx, req)
	case debug.ActionReload:
		return n.controlReload(ctx, req)
	}
	return debug.ControlReply{}, fmt.Errorf("%w: unknown action %q (pause, resume, seek, drain, undrain, exit, reload)", debug.ErrBadControl, req.Action)
}

// Events is the node's event log (GET /debug/events). The controls record
// what they do there beyond the request itself (a paused unit picked up by
// its new owner, a seek written under a token) with Record, as the actors
// do through actors.Env.Events.
func (n *Node) Events() *events.Log { return n.events }

// RecordControl records a control asked of this node: its action, target,
// who asked and why, and the error when it failed.
func (n *Node) RecordControl(req debug.ControlRequest, err error) {
	var why []string
	if req.To != "" {
		why = append(why, "to "+req.To)
	}
	if req.Reason != "" {
		why = append(why, req.Reason)
	}
	if err != nil {
		why = append(why, "failed: "+err.Error())
	}
	n.events.Record(events.Event{Kind: events.KindControl, Action: req.Action, Source: req.Source, Unit: req.Unit,
		By: req.By, Reason: strings.Join(why, "; ")})
}
